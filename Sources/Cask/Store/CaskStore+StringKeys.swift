/// One vocabulary for keys: every call that takes a key or a prefix as bytes also takes a `String`
/// (its UTF-8 bytes), as `get`, `put`, `delete` and `contains` do. Listings by a `String` prefix
/// return `String` keys. Same costs, consistency and thread-safety as the byte forms they call.
extension CaskStore {
    /// The keys that start with `prefix`, as strings: ``keys(in:after:limit:order:)`` of
    /// `.prefix(prefix)`. A key that is not valid UTF-8 (written as bytes) comes out with its
    /// invalid bytes replaced by U+FFFD: list such keys as bytes.
    ///
    /// ```swift
    /// let newest = try store.keys(prefix: "drafts/ada/", limit: 20, order: .descending)   // [String]
    /// ```
    public func keys(prefix: String, after: String? = nil, limit: Int = .max, order: KeyOrder = .ascending) throws(CaskError) -> [String] {
        try keys(in: .prefix(prefix), after: after.map { Array($0.utf8) }, limit: limit, order: order)
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// The number of keys that start with `prefix`: ``count(in:)`` of `.prefix(prefix)`.
    public func count(prefix: String) throws(CaskError) -> Int {
        try count(in: .prefix(prefix))
    }

    /// `forEach(in: .prefix(prefix), …)`.
    public func forEach(
        prefix: String, order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(CaskError) -> Void
    ) throws(CaskError) {
        try forEach(in: .prefix(prefix), order: order, body)
    }

    /// `forEach(in: .prefix(prefix), …)`, for a `body` that throws errors of its own.
    public func forEach(
        prefix: String, order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try forEach(in: .prefix(prefix), order: order, body)
    }

    /// `entries(in: .prefix(prefix), …)`.
    public func entries(prefix: String, order: KeyOrder = .ascending) throws(CaskError) -> EntryIterator {
        try entries(in: .prefix(prefix), order: order)
    }

    /// The value and expiry of `key` (its UTF-8 bytes): ``entry(_:)-(Collection<UInt8>)``.
    public func entry(_ key: String) throws(CaskError) -> Entry? {
        try entry(key.utf8)
    }

    /// The changes to `key` (its UTF-8 bytes): ``changes(forKey:bufferingPolicy:)-(Collection<UInt8>,_)``.
    public func changes(forKey key: String, bufferingPolicy: AsyncStream<Change>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Change> {
        changes(forKey: key.utf8, bufferingPolicy: bufferingPolicy)
    }

    /// The changes to every key starting with `prefix` (its UTF-8 bytes): ``changes(prefix:bufferingPolicy:)-(Collection<UInt8>,_)``.
    public func changes(prefix: String, bufferingPolicy: AsyncStream<Change>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Change> {
        changes(prefix: prefix.utf8, bufferingPolicy: bufferingPolicy)
    }
}
