import Dispatch
import Synchronization

extension CaskStore {
    /// One committed change, as ``changes(forKey:)`` and ``changes(prefix:)`` deliver it.
    public struct Change: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            case put
            case delete
            /// The key's expiry passed (delivered when the store notices: within about 10 ms).
            case expire
        }

        public var kind: Kind
        public var key: [UInt8]
        /// The change's sequence number: changes arrive in increasing seq order (commit order).
        public var seq: UInt64
    }

    /// The changes to `key` from now on, in commit order. The sequence ends when the store closes
    /// or the consumer stops iterating. Changes are buffered without bound for a slow consumer.
    public func changes(forKey key: some Collection<UInt8>) -> AsyncStream<Change> {
        observe(ObserverRegistry.Filter(bytes: Array(key), isPrefix: false))
    }

    /// The changes to every key starting with `prefix` (all keys for an empty prefix).
    public func changes(prefix: some Collection<UInt8>) -> AsyncStream<Change> {
        observe(ObserverRegistry.Filter(bytes: Array(prefix), isPrefix: true))
    }

    private func observe(_ filter: ObserverRegistry.Filter) -> AsyncStream<Change> {
        let (stream, continuation) = AsyncStream<Change>.makeStream()
        let registry = observers
        let id = registry.add(filter, continuation)
        continuation.onTermination = { _ in registry.remove(id) }
        if isClosed.load(ordering: .acquiring) { continuation.finish() }
        return stream
    }

    /// Called under the writer mutex, after the index was updated: so changes go out in seq order.
    @inline(__always)
    func publish(_ kind: Change.Kind, key: UnsafeRawBufferPointer, seq: UInt64, expiresAt: UInt64?, location: RecordLocation) {
        guard observers.isActive else { return }
        observers.publish(Change(kind: kind, key: Array(key), seq: seq))
        if let expiresAt, kind == .put { scheduleExpiryNotice(key: Array(key), seq: seq, location: location, at: expiresAt) }
    }

    /// Delivers `.expire` for `key` once its record at `location` expires, if it is still the latest.
    private func scheduleExpiryNotice(key: [UInt8], seq: UInt64, location: RecordLocation, at expiresAt: UInt64) {
        let delay = expiresAt > Self.nowMilliseconds() ? Int(expiresAt - Self.nowMilliseconds()) : 0
        let registry = observers, state = state, writer = writer
        background.asyncAfter(deadline: .now() + .milliseconds(delay + 1)) {
            // Under the writer mutex, so that no write slips between the check and the notice.
            writer?.withLock { w in
                guard !w.closed else { return }
                let stillExpiring = key.withUnsafeBytes { key in
                    state.read { shared in
                        shared.index.lookup(key) == location && shared.expiries.isExpired(key, now: CaskStore.nowMilliseconds())
                    }
                }
                // The index still points at the record the notice was scheduled for.
                if stillExpiring { registry.publish(Change(kind: .expire, key: key, seq: seq)) }
            }
        }
    }
}

/// The live change observers of a store. Thread-safe; `isActive` is a cheap check for the write path.
final class ObserverRegistry: Sendable {
    struct Filter: Sendable {
        var bytes: [UInt8]
        var isPrefix: Bool

        func matches(_ key: [UInt8]) -> Bool {
            isPrefix ? key.starts(with: bytes) : key == bytes
        }
    }

    private struct Entry {
        var filter: Filter
        var continuation: AsyncStream<CaskStore.Change>.Continuation
    }

    private let entries = Lock<[Int: Entry]>([:])
    private let count = Atomic(0)
    private let nextID = Atomic(0)

    var isActive: Bool { count.load(ordering: .relaxed) > 0 }

    func add(_ filter: Filter, _ continuation: AsyncStream<CaskStore.Change>.Continuation) -> Int {
        let id = nextID.add(1, ordering: .relaxed).newValue
        entries.withLock { $0[id] = Entry(filter: filter, continuation: continuation) }
        count.add(1, ordering: .relaxed)
        return id
    }

    func remove(_ id: Int) {
        let removed = entries.withLock { $0.removeValue(forKey: id) != nil }
        if removed { count.subtract(1, ordering: .relaxed) }
    }

    func publish(_ change: CaskStore.Change) {
        entries.withLock { entries in
            for entry in entries.values where entry.filter.matches(change.key) { entry.continuation.yield(change) }
        }
    }

    /// Ends every stream (the store closed).
    func finishAll() {
        let all = entries.withLock { entries in
            defer { entries.removeAll() }
            return Array(entries.values)
        }
        count.store(0, ordering: .relaxed)
        for entry in all { entry.continuation.finish() }
    }
}
