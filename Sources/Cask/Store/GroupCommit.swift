import Foundation

/// Durability for writers that ask for it: `.fsync` writes and ``CaskStore/sync()`` calls wait
/// here, outside the writer mutex, until what they wrote is on stable storage, and concurrent
/// waiters share one `fdatasync` (group commit, rule 3 of ``CaskStore``).
///
/// The first waiter becomes the leader and syncs for all. Before it does, it waits for writers on
/// their way — those that have begun a write, and those the last sync covered that have not left
/// yet (in a loop of durable writes each is back with its next write within microseconds) — at
/// most half as long as the last sync took and at most 1 ms, so that one sync covers them all
/// rather than about half. A lone writer never waits.
///
/// Once a sync fails, every later wait fails with that error: the kernel reports a failed
/// writeback only once, so a later sync could succeed although data was lost.
final class GroupCommit: Sendable {
    struct State {
        var synced = SyncPosition(segmentID: 0, offset: 0)
        var syncing = false
        var failure: CaskError?
        /// `.fsync` writers that have begun a write and not yet begun waiting for its sync.
        var arriving = 0
        /// The position each waiting `.fsync` writer needs synced, until it leaves: one whose position
        /// is synced already has been woken and is on its way out (and likely back with a next write).
        var waiting: [SyncPosition] = []
        /// How long the last sync took: a leader gathers arriving writers for at most half of it.
        var lastSyncNanoseconds: UInt64 = 0

        /// Whether writers are on their way to the next sync: some have begun a write, or were
        /// covered by the last sync and have not left yet (likely back with a next write).
        var writersOnTheirWay: Bool {
            arriving > 0 || waiting.contains { $0 <= synced }
        }
    }

    let state = ConditionLock(State())
    private let fileSystem: any FileSystem

    /// A task waiting, suspended, for a position to be durable (``durable(_:force:writer:)``).
    private struct SuspendedWaiter {
        var target: SyncPosition
        var force: Bool
        var continuation: CheckedContinuation<CaskError?, Never>
    }

    /// The suspended waiters not yet taken by the sync thread, and whether that thread runs.
    private struct Suspended {
        var waiters: [SuspendedWaiter] = []
        var threadRuns = false
    }

    private let suspended = ConditionLock(Suspended())

    /// How long the sync thread waits for new suspended waiters before it ends.
    private static let syncThreadLinger: UInt64 = 50_000_000

    init(fileSystem: any FileSystem) {
        self.fileSystem = fileSystem
    }

    /// Suspends until everything up to `target` is on stable storage (`force`: until a sync that
    /// began after this call has ended), without blocking the calling thread. The syncs run on a
    /// thread of the store's own — never one of Dispatch's, which on Linux are the Swift
    /// concurrency pool's too — one `fdatasync` for all the waiters that came while the last one
    /// ran, beside blocking waiters (``waitUntilDurable(_:force:arriving:writer:)``), whose rules
    /// it keeps. The thread ends once no waiter has come for 50 ms. Throws the failure of the sync
    /// that would have covered the target, as every wait after it does.
    func durable(_ target: SyncPosition, force: Bool, writer: Lock<StoreWriter>) async throws(CaskError) {
        if !force {
            let known: CaskError?? = state.withLock { sync, _ in
                if let failure = sync.failure { return .some(failure) }
                return sync.synced >= target ? .some(nil) : nil
            }
            if let known {
                if let failure = known { throw failure }
                return
            }
        }
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<CaskError?, Never>) in
            let startThread = suspended.withLock { waiting, waiter -> Bool in
                waiting.waiters.append(SuspendedWaiter(target: target, force: force, continuation: continuation))
                waiter.signal()
                defer { waiting.threadRuns = true }
                return !waiting.threadRuns
            }
            if startThread {
                let thread = Thread { self.syncForSuspendedWaiters(writer) }
                thread.name = "cask.group-commit"
                thread.start()
            }
        }
        if let failure { throw failure }
    }

    /// The sync thread's work: syncs for the suspended waiters, all that have come at a time,
    /// until none has come for ``syncThreadLinger``.
    private func syncForSuspendedWaiters(_ writer: Lock<StoreWriter>) {
        while true {
            let batch = suspended.withLock { waiting, waiter -> [SuspendedWaiter] in
                if waiting.waiters.isEmpty {
                    let deadline = ConditionLock<Suspended>.monotonicNanoseconds() + Self.syncThreadLinger
                    while waiting.waiters.isEmpty && ConditionLock<Suspended>.monotonicNanoseconds() < deadline {
                        waiter.waitForSignal(untilNanoseconds: deadline)
                    }
                    if waiting.waiters.isEmpty { waiting.threadRuns = false }
                }
                defer { waiting.waiters.removeAll() }
                return waiting.waiters
            }
            guard let target = batch.map(\.target).max() else { return }
            var failure: CaskError?
            do throws(CaskError) {
                try waitUntilDurable(target, force: batch.contains { $0.force }, writer: writer)
            } catch {
                failure = error
            }
            for waiter in batch { waiter.continuation.resume(returning: failure) }
        }
    }

    /// Runs `append` (a write under the writer mutex, returning where its records end, or nil when it
    /// wrote nothing), then waits until they are durable. Meanwhile the writer counts as arriving,
    /// so that a sync leader starting then waits for it and covers it too.
    func append(writer: Lock<StoreWriter>, _ append: () throws(CaskError) -> SyncPosition?) throws(CaskError) -> SyncPosition? {
        state.withLock { sync, _ in sync.arriving += 1 }
        /// The writer is not coming after all: nothing written, or the write failed.
        func withdraw() {
            state.withLock { sync, waiter in
                sync.arriving -= 1
                Self.wakeGatheringLeader(sync, waiter)
            }
        }
        let target: SyncPosition?
        do throws(CaskError) { target = try append() } catch {
            withdraw()
            throw error
        }
        guard let target else {
            withdraw()
            return nil
        }
        try waitUntilDurable(target, force: false, arriving: true, writer: writer)
        return target
    }

    /// Returns once everything up to `target` is on stable storage. `force` always syncs (for
    /// `sync()` in modes whose writes do not track durability). `arriving`: the caller was counted
    /// as arriving (``append(writer:_:)``) and now waits as a writer.
    func waitUntilDurable(_ target: SyncPosition, force: Bool, arriving: Bool = false, writer: Lock<StoreWriter>) throws(CaskError) {
        var needsOwnSync = force, arriving = arriving
        var registered = false
        /// The writer stops waiting (a leader gathering writers may be waiting for that).
        func leave(_ sync: inout State, _ waiter: ConditionLock<State>.Waiter) {
            guard registered else { return }
            registered = false
            if let position = sync.waiting.firstIndex(of: target) { sync.waiting.remove(at: position) }
            Self.wakeGatheringLeader(sync, waiter)
        }
        while true {
            let decision: Decision = state.withLock { sync, waiter in
                if arriving {
                    arriving = false
                    sync.arriving -= 1
                    sync.waiting.append(target)
                    registered = true
                    Self.wakeGatheringLeader(sync, waiter)
                }
                while true {
                    if let failure = sync.failure {
                        leave(&sync, waiter)
                        return .failed(failure)
                    }
                    if !needsOwnSync && sync.synced >= target {
                        leave(&sync, waiter)
                        return .done
                    }
                    if !sync.syncing { break }
                    waiter.wait()
                }
                sync.syncing = true
                Self.gatherArrivingWriters(&sync, waiter)
                return .lead
            }
            switch decision {
            case .done: return
            case .failed(let failure): throw failure
            case .lead: break
            }
            let result = syncEverythingWritten(writer)
            state.withLock { sync, waiter in
                sync.syncing = false
                switch result {
                case .success(let (position, duration)):
                    if sync.synced < position { sync.synced = position }
                    sync.lastSyncNanoseconds = duration
                case .failure(let failure):
                    sync.failure = failure
                    leave(&sync, waiter)
                }
                waiter.broadcast()
            }
            switch result {
            case .success: needsOwnSync = false
            case .failure(let failure):
                writer.withLock { $0.failure = failure }
                throw failure
            }
        }
    }

    /// From now on writes, syncs and close fail with `failure` (a sync failed outside a wait here:
    /// a background hint write's).
    static func noteFailure(_ failure: CaskError, writer: Lock<StoreWriter>?, groupCommit: GroupCommit) {
        writer?.withLock { w in if w.failure == nil { w.failure = failure } }
        groupCommit.state.withLock { sync, waiter in
            if sync.failure == nil { sync.failure = failure }
            waiter.signal()  // a leader gathering writers need not wait any longer
        }
    }

    private enum Decision {
        case done, lead
        case failed(CaskError)
    }

    /// Wakes the leader gathering writers once the last of them has arrived (or left). Only then:
    /// each wake-up costs the leader a context switch.
    private static func wakeGatheringLeader(_ sync: borrowing State, _ waiter: ConditionLock<State>.Waiter) {
        if sync.syncing && !sync.writersOnTheirWay { waiter.signal() }
    }

    /// A new leader waits for the writers on their way (see the type's comment).
    private static func gatherArrivingWriters(_ sync: inout State, _ waiter: ConditionLock<State>.Waiter) {
        guard sync.writersOnTheirWay else { return }
        let deadline = ConditionLock<State>.monotonicNanoseconds() + min(sync.lastSyncNanoseconds / 2, 1_000_000)
        while sync.writersOnTheirWay && sync.failure == nil && ConditionLock<State>.monotonicNanoseconds() < deadline {
            waiter.waitForSignal(untilNanoseconds: deadline)
        }
    }

    /// The leader's work: `fdatasync` every segment with unsynced writes, oldest first. Returns the
    /// position synced and how long the `fdatasync`s took.
    private func syncEverythingWritten(_ writer: Lock<StoreWriter>) -> Result<(SyncPosition, UInt64), CaskError> {
        let (active, position, sealed, failure) = writer.withLock { w in
            let sealed = w.unsyncedSealed
            w.unsyncedSealed.removeAll()
            return (w.active, SyncPosition(segmentID: w.active.id, offset: w.flushed), sealed, w.failure)
        }
        // After a failed sync (say, sealing a segment) a new one may succeed although the failed one
        // dropped data written before it: never report durability past a failure.
        if let failure { return .failure(failure) }
        let start = ConditionLock<State>.monotonicNanoseconds()
        for file in sealed + [active] {
            do throws(Errno) { try fileSystem.fdatasync(file.fd) } catch {
                return .failure(CaskError.syncFailed(path: file.path, errno: error))
            }
        }
        return .success((position, ConditionLock<State>.monotonicNanoseconds() - start))
    }
}
