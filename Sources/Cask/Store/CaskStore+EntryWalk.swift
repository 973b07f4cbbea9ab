extension CaskStore {
    /// Calls `body` with every entry in `range`, in key order (or descending), with its expiry:
    /// `forEach(in:after:order:_:)` with the expiry time beside the key and the value, for a copy of
    /// the store such as `cask export` makes.
    ///
    /// ```swift
    /// try store.forEachEntry(in: .prefix("drafts/")) { key, value, expiresAt in try copy(key, value, expiresAt) }
    /// ```
    ///
    /// The same keys, order, values, consistency, thread-safety and errors as
    /// `forEach(in:after:order:_:)`: a damaged record throws
    /// ``CaskError/corruptRecord(path:offset:reason:)`` after every entry before it was visited; an
    /// error `body` throws stops the walk and comes out as it is. `expiresAtMilliseconds` is the
    /// record's (milliseconds since 1970-01-01 UTC), nil for a key that never expires. No
    /// allocation per entry: `key` and `value` are valid only during the call to `body`.
    public func forEachEntry(
        in range: KeyRange = .all, after: [UInt8]? = nil, order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ expiresAtMilliseconds: UInt64?) throws -> Void
    ) throws {
        var scan = EntryScan(store: self, range: range, after: after, order: order)
        while let visited = try scan.visitNext({ key, value, expiresAt in Result { try body(key, value, expiresAt) } }) {
            try visited.get()
        }
    }
}
