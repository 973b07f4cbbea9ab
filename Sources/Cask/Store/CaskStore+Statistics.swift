extension CaskStore {
    /// A snapshot of the store's size and space accounting.
    public struct Statistics: Sendable, Equatable {
        /// Keys a read finds (as ``CaskStore/count``: expired keys are not counted).
        public var keys: Int
        /// Keys that have expired but whose records are still on disk, until a compaction drops them.
        public var expiredKeys: Int
        /// Bytes of the records the index points at (what compaction would keep).
        public var liveBytes: Int64
        /// Bytes of overwritten and deleted records, tombstones and damage (what compaction reclaims).
        public var deadBytes: Int64
        /// Bytes of all segment files.
        public var segmentBytes: Int64
        /// Bytes of the in-memory index, and the key bytes it holds.
        public var indexBytes: Int
        public var indexKeyBytes: Int
        /// Per segment, in id order.
        public var segments: [SegmentStats]

        /// Index memory per key beyond the key bytes themselves.
        public var indexOverheadPerKey: Double {
            keys + expiredKeys == 0 ? 0 : Double(indexBytes - indexKeyBytes) / Double(keys + expiredKeys)
        }
    }

    /// Current statistics. Thread-safe; O(segments), plus O(keys with an expiry) when there are any.
    public func statistics() throws(CaskError) -> Statistics {
        try state.read { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed(path: directory) }
            let segments = shared.stats.segments
            let expired = shared.expiries.isEmpty ? 0 : shared.expiries.expiredCount(now: Self.nowMilliseconds())
            return Statistics(
                keys: shared.index.count - expired,
                expiredKeys: expired,
                liveBytes: segments.reduce(0) { $0 + $1.liveBytes },
                deadBytes: segments.reduce(0) { $0 + $1.deadBytes },
                segmentBytes: segments.reduce(0) { $0 + $1.fileBytes },
                indexBytes: shared.index.memoryBytes,
                indexKeyBytes: shared.index.totalKeyBytes,
                segments: segments)
        }
    }
}
