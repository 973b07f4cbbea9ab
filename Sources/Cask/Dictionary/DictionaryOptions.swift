/// Whether and when a store trains a dictionary for its records (``CaskStore/Options/dictionaries``).
///
/// A record of a few hundred bytes has little inside it for LZ4 to match; compressed against
/// 64 KiB of content learnt from the store's own values (field names, common strings, shared
/// prefixes), it shrinks by half or more. See docs/dictionaries.md.
public struct DictionaryOptions: Sendable, Equatable {
    /// Train a dictionary and compress new records against it. When false, no dictionary is
    /// trained and new segments are written without one; records already compressed against one
    /// are still read (the dictionary is kept while any segment names it), and compaction rewrites
    /// them without it. Default true.
    public var enabled = true
    /// A writer trains the store's first dictionary once this many bytes of values that it
    /// compresses (32 bytes and up; at most 16 KiB of each) have been put since the store was
    /// opened, in the background; new segments then name it, the active one is sealed for that,
    /// and compaction recompresses what it copies against it. A store with less never gets a
    /// dictionary: there would be too little to learn from. Default 4 MiB (training takes about
    /// 0.3 s of one core).
    public var trainingSampleBytes = 4 << 20

    public init() {}

    public init(enabled: Bool, trainingSampleBytes: Int = 4 << 20) {
        self.enabled = enabled
        self.trainingSampleBytes = trainingSampleBytes
    }

    /// The most of one value a sample takes.
    static let sampleLimit = 16 << 10
}
