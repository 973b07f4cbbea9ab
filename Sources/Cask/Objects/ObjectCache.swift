/// What the decoded-object cache did so far. See ``CaskStore/objectCacheStatistics``.
public struct ObjectCacheStatistics: Sendable, Hashable {
    /// Reads served from the cache.
    public var hits: Int
    /// Reads that decoded the record (absent entries, stale ones, other types or coders).
    public var misses: Int
    /// Values cached now.
    public var entries: Int
    /// Their encoded sizes, summed.
    public var bytes: Int
}

/// A least-recently-used cache of decoded values, each stamped with the record it was decoded from.
///
/// An entry is served only for the same record location, type and coder it was stored with; a
/// different location means the key was written since (or compacted), and the entry is dropped.
/// Thread-safe (one mutex; the work under it is a hash lookup and a few index updates).
final class ObjectCache: Sendable {
    private struct Entry {
        var key: String
        var location: RecordLocation
        var type: ObjectIdentifier
        var coder: ObjectCoder
        var value: any Sendable
        var cost: Int
        var newer = -1
        var older = -1
    }

    private struct State {
        var slots: [String: Int] = [:]
        var entries: [Entry?] = []
        var free: [Int] = []
        /// Most and least recently used entries (-1: none).
        var newest = -1
        var oldest = -1
        var bytes = 0
        var hits = 0
        var misses = 0

        mutating func unlink(_ index: Int) {
            let entry = entries[index]!
            if entry.newer >= 0 { entries[entry.newer]!.older = entry.older } else { newest = entry.older }
            if entry.older >= 0 { entries[entry.older]!.newer = entry.newer } else { oldest = entry.newer }
        }

        mutating func linkNewest(_ index: Int) {
            entries[index]!.older = newest
            entries[index]!.newer = -1
            if newest >= 0 { entries[newest]!.newer = index }
            newest = index
            if oldest < 0 { oldest = index }
        }

        mutating func remove(_ index: Int) {
            unlink(index)
            let entry = entries[index]!
            slots[entry.key] = nil
            bytes -= entry.cost
            entries[index] = nil
            free.append(index)
        }
    }

    let limit: CaskStore.ObjectCacheLimit
    private let state = Lock(State())

    init(limit: CaskStore.ObjectCacheLimit) {
        self.limit = limit
    }

    /// The cached value of `key` if it was decoded from `location` as `type` with `coder`.
    func value(forKey key: String, at location: RecordLocation, type: ObjectIdentifier, coder: ObjectCoder) -> (any Sendable)? {
        state.withLock { state in
            guard let index = state.slots[key] else {
                state.misses += 1
                return nil
            }
            let entry = state.entries[index]!
            guard entry.location == location else {
                state.remove(index)  // the key was written since
                state.misses += 1
                return nil
            }
            guard entry.type == type, entry.coder == coder else {
                state.misses += 1
                return nil
            }
            state.hits += 1
            state.unlink(index)
            state.linkNewest(index)
            return entry.value
        }
    }

    /// Caches `value`, decoded from the record at `location` of `cost` bytes, evicting the least
    /// recently used entries beyond the limits.
    func insert(_ value: any Sendable, forKey key: String, at location: RecordLocation, type: ObjectIdentifier, coder: ObjectCoder, cost: Int) {
        if let maxBytes = limit.maxBytes, cost > maxBytes { return }
        state.withLock { state in
            if let existing = state.slots[key] { state.remove(existing) }
            let entry = Entry(key: key, location: location, type: type, coder: coder, value: value, cost: cost)
            let index: Int
            if let reused = state.free.popLast() {
                index = reused
                state.entries[index] = entry
            } else {
                index = state.entries.count
                state.entries.append(entry)
            }
            state.slots[key] = index
            state.bytes += cost
            state.linkNewest(index)
            while state.oldest >= 0,
                  state.slots.count > (limit.maxEntries ?? .max) || state.bytes > (limit.maxBytes ?? .max) {
                state.remove(state.oldest)
            }
        }
    }

    /// Drops every entry (a closed store).
    func removeAll() {
        state.withLock { state in
            let (hits, misses) = (state.hits, state.misses)
            state = State()
            state.hits = hits
            state.misses = misses
        }
    }

    var statistics: ObjectCacheStatistics {
        state.withLock { ObjectCacheStatistics(hits: $0.hits, misses: $0.misses, entries: $0.slots.count, bytes: $0.bytes) }
    }
}
