/// The expiry times of the keys whose latest record has one (milliseconds since 1970 UTC).
///
/// The index has no room for an expiry per key, and most keys never expire: this side table holds
/// only the keys that do, so a store that never uses expiry pays nothing for it (every operation
/// checks `isEmpty` first). Guarded by the store's index lock, like the index.
package struct ExpiryTable {
    private var times: [[UInt8]: UInt64] = [:]

    package init() {}

    package var isEmpty: Bool { times.isEmpty }

    /// Records that `key`'s latest record expires at `time`, or (nil) never.
    package mutating func set(_ key: UnsafeRawBufferPointer, expiresAt time: UInt64?) {
        if let time {
            times[Array(key)] = time
        } else if !times.isEmpty {
            times.removeValue(forKey: Array(key))
        }
    }

    package func isExpired(_ key: UnsafeRawBufferPointer, now: UInt64) -> Bool {
        guard !times.isEmpty, let time = times[Array(key)] else { return false }
        return time <= now
    }

    /// How many keys have expired by `now`. O(keys with an expiry).
    package func expiredCount(now: UInt64) -> Int {
        times.values.reduce(0) { $0 + ($1 <= now ? 1 : 0) }
    }

    package func expiresAt(_ key: [UInt8]) -> UInt64? { times[key] }
}
