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
    /// or the consumer stops iterating.
    ///
    /// `bufferingPolicy` says what a consumer slower than the writers gets: every change, buffered
    /// without bound (the default), or only the oldest or newest n changes not yet consumed. Writers
    /// never wait for a consumer. To follow a value rather than its changes, see
    /// ``observe(_:forKey:coder:)``.
    ///
    /// `.expire` comes for every expiry that passes while the stream lives, whenever the put that
    /// set it was made — before the stream, or before the store was last opened.
    public func changes(
        forKey key: some Collection<UInt8>, bufferingPolicy: AsyncStream<Change>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<Change> {
        observe(ObserverRegistry.Filter(bytes: Array(key), isPrefix: false), bufferingPolicy)
    }

    /// The changes to every key starting with `prefix` (all keys for an empty prefix), as
    /// ``changes(forKey:bufferingPolicy:)`` delivers them.
    public func changes(
        prefix: some Collection<UInt8>, bufferingPolicy: AsyncStream<Change>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<Change> {
        observe(ObserverRegistry.Filter(bytes: Array(prefix), isPrefix: true), bufferingPolicy)
    }

    private func observe(
        _ filter: ObserverRegistry.Filter, _ bufferingPolicy: AsyncStream<Change>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<Change> {
        let (stream, continuation) = AsyncStream<Change>.makeStream(bufferingPolicy: bufferingPolicy)
        let registry = observers
        let (id, next) = state.write { shared -> (Int, UInt64?) in
            // Expiries that passed while nobody watched are not news to a new stream. The check and
            // the registration share the state lock (the expiry timer takes its notices under it),
            // so that of two first streams only one discards them, before the other is registered.
            if !registry.isActive { _ = shared.expiries.takeNotices(dueBy: Self.nowMilliseconds()) }
            return (registry.add(filter, continuation), shared.expiries.nextNoticeTime())
        }
        continuation.onTermination = { _ in registry.remove(id) }
        if isClosed.load(ordering: .acquiring) { continuation.finish() }
        if let next { scheduleExpiryNotices(at: next) }
        return stream
    }

    /// Called under the writer mutex, after the index was updated: so changes go out in seq order.
    @inline(__always)
    func publish(_ kind: Change.Kind, key: UnsafeRawBufferPointer, seq: UInt64, expiresAt: UInt64?, location: RecordLocation) {
        guard observers.isActive else { return }
        observers.publish(Change(kind: kind, key: Array(key), seq: seq))
        if let expiresAt, kind == .put { scheduleExpiryNotices(at: expiresAt) }
    }

    /// Makes sure the expiry notices due at `time` go out then (within a few milliseconds): one
    /// timer at a time, for the earliest notice due, while any stream lives.
    private func scheduleExpiryNotices(at time: UInt64) {
        Self.scheduleExpiryNotices(at: time, ExpiryNoticeParts(
            registry: observers, state: state, writer: writer, timer: expiryTimer, queue: background))
    }

    /// What the expiry timer uses: the store's parts, never the store itself, so that the store is
    /// never released (and closed, which waits for this queue) on its own background queue.
    private struct ExpiryNoticeParts: Sendable {
        let registry: ObserverRegistry
        let state: ReadWriteLock<SharedState>
        let writer: Lock<StoreWriter>?
        let timer: Lock<UInt64?>
        let queue: DispatchQueue
    }

    private static func scheduleExpiryNotices(at time: UInt64, _ parts: ExpiryNoticeParts) {
        let sooner = parts.timer.withLock { (scheduled: inout UInt64?) -> Bool in
            if let scheduled, scheduled <= time { return false }
            scheduled = time
            return true
        }
        guard sooner else { return }
        let now = nowMilliseconds()
        let delay = time > now ? Int(min(time - now, UInt64(Int32.max))) : 0
        parts.queue.asyncAfter(deadline: .now() + .milliseconds(delay + 1)) {
            // Under the writer mutex (when there is one), so that no write slips between the check
            // of the table and the notices: changes go out in seq order. The timer is cleared there
            // too, before the table is read: a put after that sets a timer of its own.
            func giveNotices() -> UInt64? {
                parts.timer.withLock { scheduled in if scheduled == time { scheduled = nil } }
                let (due, next) = parts.state.write { shared -> ([(key: [UInt8], seq: UInt64)], UInt64?) in
                    if shared.closed { return ([], nil) }
                    let due = shared.expiries.takeNotices(dueBy: CaskStore.nowMilliseconds())
                    return (due, shared.expiries.nextNoticeTime())
                }
                for notice in due { parts.registry.publish(Change(kind: .expire, key: notice.key, seq: notice.seq)) }
                return next
            }
            let next = parts.writer.map { writer in writer.withLock { w in w.closed ? nil : giveNotices() } } ?? giveNotices()
            if let next, parts.registry.isActive { scheduleExpiryNotices(at: next, parts) }
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
