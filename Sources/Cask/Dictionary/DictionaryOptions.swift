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
    /// and compaction recompresses what it copies against it. A compaction also samples the values
    /// it copies (up to this many bytes) and, when it copied at least a sixteenth of this, trains a
    /// dictionary from them, used when it saves 10% more than the store's current one (or than none):
    /// so a store that is opened often and written a little each time gets one too, and one whose
    /// data changed gets a new one. More than 0 (an open refuses less). Default 4 MiB (training
    /// takes about 0.3 s of one core).
    public var trainingSampleBytes = 4 << 20

    public init() {}

    public init(enabled: Bool, trainingSampleBytes: Int = 4 << 20) {
        self.enabled = enabled
        self.trainingSampleBytes = trainingSampleBytes
    }

    /// The most of one value a sample takes.
    static let sampleLimit = 16 << 10

    /// A compaction trains a dictionary from the values it copies (up to ``trainingSampleBytes`` of
    /// them) when it copied at least this share of that.
    static let compactionSampleShare = 16
}
