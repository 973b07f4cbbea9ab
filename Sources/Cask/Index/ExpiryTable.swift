/// The expiry times of the keys whose latest record has one (milliseconds since 1970 UTC), and the
/// notices of their expiry still to give (``CaskStore/Change/Kind/expire``).
///
/// The index has no room for an expiry per key, and most keys never expire: this side table holds
/// only the keys that do, so a store that never uses expiry pays nothing for it (every operation
/// checks `isEmpty` first). Guarded by the store's index lock, like the index.
///
/// Notices are a min-heap of (time, seq, key), one pushed per record with an expiry. An entry is
/// stale once its key has a newer record (the table then holds another seq, or nothing) and is
/// skipped when it comes up; the heap is rebuilt from the table when stale entries outnumber it.
package struct ExpiryTable {
    private struct Expiry: Equatable {
        var time: UInt64
        var seq: UInt64
    }

    private struct Notice {
        var time: UInt64
        var seq: UInt64
        var key: [UInt8]
    }

    private var times: [[UInt8]: Expiry] = [:]
    private var notices: [Notice] = []

    package init() {}

    package var isEmpty: Bool { times.isEmpty }

    /// Records that `key`'s latest record, `seq`, expires at `time`, or (nil) never.
    package mutating func set(_ key: UnsafeRawBufferPointer, expiresAt time: UInt64?, seq: UInt64) {
        guard let time else { return remove(key) }
        let bytes = Array(key)
        let expiry = Expiry(time: time, seq: seq)
        // Recovery may apply one record twice (a compaction's input and output both present): one notice.
        guard times.updateValue(expiry, forKey: bytes) != expiry else { return }
        push(Notice(time: time, seq: seq, key: bytes))
        if notices.count > 2 * times.count + 1024 { rebuildNotices() }
    }

    /// Records that `key`'s latest record never expires (or that it has none).
    package mutating func remove(_ key: UnsafeRawBufferPointer) {
        if !times.isEmpty { times.removeValue(forKey: Array(key)) }
    }

    package func isExpired(_ key: UnsafeRawBufferPointer, now: UInt64) -> Bool {
        guard !times.isEmpty, let expiry = times[Array(key)] else { return false }
        return expiry.time <= now
    }

    /// How many keys have expired by `now`. O(keys with an expiry).
    package func expiredCount(now: UInt64) -> Int {
        times.values.reduce(0) { $0 + ($1.time <= now ? 1 : 0) }
    }

    package func expiresAt(_ key: [UInt8]) -> UInt64? { times[key]?.time }

    /// Calls `body` with each key that has expired by `now`. O(keys with an expiry).
    package func forEachExpired(now: UInt64, _ body: ([UInt8]) -> Void) {
        for (key, expiry) in times where expiry.time <= now { body(key) }
    }

    // MARK: Notices

    /// When the next notice is due; nil when no key that has not expired yet has an expiry.
    /// O(log n) per stale entry passed.
    package mutating func nextNoticeTime() -> UInt64? {
        while let first = notices.first {
            if times[first.key] == Expiry(time: first.time, seq: first.seq) { return first.time }
            popFirst()
        }
        return nil
    }

    /// The keys (with the seq of the record that expired) whose expiry is due by `now` and has not
    /// been noticed yet, in time order; each is given once. O(k log n).
    package mutating func takeNotices(dueBy now: UInt64) -> [(key: [UInt8], seq: UInt64)] {
        var due: [(key: [UInt8], seq: UInt64)] = []
        while let first = notices.first, first.time <= now {
            popFirst()
            if times[first.key] == Expiry(time: first.time, seq: first.seq) { due.append((first.key, first.seq)) }
        }
        return due
    }

    /// Test-only: notices pending, stale ones included.
    package var pendingNotices: Int { notices.count }

    private mutating func rebuildNotices() {
        // The pending notices that are not stale, due ones included (a time already past when set).
        notices = notices.filter { times[$0.key] == Expiry(time: $0.time, seq: $0.seq) }
        notices.sort { $0.time < $1.time }  // a sorted array is a heap
    }

    private mutating func push(_ notice: Notice) {
        notices.append(notice)
        var child = notices.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard notices[child].time < notices[parent].time else { break }
            notices.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popFirst() {
        let last = notices.removeLast()
        guard !notices.isEmpty else { return }
        notices[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < notices.count, notices[left].time < notices[smallest].time { smallest = left }
            if right < notices.count, notices[right].time < notices[smallest].time { smallest = right }
            if smallest == parent { return }
            notices.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
