extension CaskStore {
    /// A key with its value and expiry time, as one record holds them.
    public struct Entry: Sendable, Equatable {
        public var key: [UInt8]
        public var value: [UInt8]
        /// When the key expires: milliseconds since 1970-01-01 UTC, or nil when it never does.
        public var expiresAtMilliseconds: UInt64?

        public init(key: [UInt8], value: [UInt8], expiresAtMilliseconds: UInt64? = nil) {
            self.key = key
            self.value = value
            self.expiresAtMilliseconds = expiresAtMilliseconds
        }
    }

    /// The value and expiry time of `key`, or nil when it is absent (or expired).
    ///
    /// Both come from the key's latest record, read once, so they belong together even while
    /// another thread writes the key. Same cost, checks and thread-safety as ``get(_:)-(Collection<UInt8>)``:
    /// a damaged record throws ``CaskError/corruptRecord(path:offset:reason:)``.
    /// To copy a store: `for key in try store.keys() { if let entry = try store.entry(key) { … } }`.
    public func entry(_ key: some Collection<UInt8>) throws(CaskError) -> Entry? {
        let key = Array(key)
        guard let record = try key.withBytes({ (key) throws(CaskError) in try readRecord(key: key) }) else { return nil }
        return Entry(key: key, value: record.value, expiresAtMilliseconds: record.expiresAt)
    }
}
