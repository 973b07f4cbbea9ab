extension CaskStore {
    /// How a store codes and caches the values of its object API (``CaskStore/set(_:forKey:coder:)``,
    /// ``CaskStore/get(_:forKey:coder:)``, typed keys). Set through ``CaskStore/Options/objects``.
    public struct ObjectOptions: Sendable {
        /// The coder used when a call names none. Default ``ObjectCoder/binary``.
        public var coder: ObjectCoder = .binary
        /// A cache of decoded values, or nil (the default) for none. See ``ObjectCacheLimit``.
        public var cache: ObjectCacheLimit?
        /// Called when a typed key's subscript (`store[key]`, which cannot throw) reads the key's
        /// default because its value could not be read — a record that no longer decodes (a model
        /// change the coding cannot bridge), a damaged record, a closed store — with the key's name
        /// and the error ``CaskStore/value(for:)`` throws. An absent key reads as its default without
        /// a call. Nil (the default): the first failure of each key is written to standard error,
        /// so that it is never silent; an app that handles them sets its own (a log, a metric, an
        /// `assertionFailure` in debug builds).
        public var onUnreadableValue: (@Sendable (_ key: String, _ error: CaskError) -> Void)?

        public init(coder: ObjectCoder = .binary, cache: ObjectCacheLimit? = nil) {
            self.coder = coder
            self.cache = cache
        }
    }

    /// The bounds of the decoded-object cache: the least recently used values are dropped once either
    /// is exceeded.
    ///
    /// The cache holds values decoded by ``CaskStore/get(_:forKey:coder:)`` (for `Sendable` types),
    /// typed keys and ``CaskStore/values(of:prefix:coder:)``. Each entry remembers which record it was
    /// decoded from, and a read serves it only while the key's index entry still points at that record:
    /// any write of the key — through this API, `put`, `delete`, from any thread — makes it stale at
    /// once, and compaction moving the record only costs one more decode. The same instance is handed
    /// to every reader, so a cached class instance is shared.
    public struct ObjectCacheLimit: Sendable, Hashable {
        /// At most this many values, if set.
        public var maxEntries: Int?
        /// At most this many bytes, if set, counting each value as the size of its encoded record (a
        /// stand-in for its size in memory). A value larger than this is not cached.
        public var maxBytes: Int?

        /// Each limit that is set must be more than 0: an open with one that is not throws
        /// ``CaskError/invalidArgument(name:reason:)``.
        public init(maxEntries: Int? = nil, maxBytes: Int? = nil) {
            self.maxEntries = maxEntries
            self.maxBytes = maxBytes
        }

        /// At most `count` values.
        public static func entries(_ count: Int) -> ObjectCacheLimit { ObjectCacheLimit(maxEntries: count) }
        /// At most `count` bytes of encoded records.
        public static func bytes(_ count: Int) -> ObjectCacheLimit { ObjectCacheLimit(maxBytes: count) }
    }
}
