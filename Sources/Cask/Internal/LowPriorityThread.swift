import CCaskCPU
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One thread of the process, 10 nice levels below the thread that first uses it, that runs work
/// which may wait while the application keeps the cores busy, in the order it was given: the hint
/// files of sealed segments (a scan of the segment with its checksums, about a third of a second
/// of a core per 64 MiB) and the compactions a seal sets off. On an idle core the work runs at
/// full speed; beside threads of the normal priority on every core it gets about a tenth of one
/// (the scheduler's weights for nice 0 and 10), so that a reader beside a writer at full speed
/// keeps its core.
///
/// A thread of its own, not Dispatch's: any thread may lower its own priority, but raising it back
/// takes a privilege (`CAP_SYS_NICE`) that an application seldom has, so a pool thread lowered for
/// one work item would stay low for all the work it runs later.
///
/// A lock taken here is held at this priority, so a thread of normal priority that waits for it
/// waits longer on a busy machine (priority inversion). Hint writing takes only the segment's
/// `retired` lock. A compaction holds the compaction gate throughout (`compact()` and `close()`
/// wait for it) and the writer mutex for a group of 1,024 keys at a time; a writer that waits
/// for one sleeps, which frees its core for this thread.
package final class LowPriorityThread: Sendable {
    /// The one thread of the process, started on first use and never stopped (idle, it waits on a
    /// condition variable).
    package static let shared = LowPriorityThread(niceIncrement: 10)

    private let queue = ConditionLock(Queue())
    private let niceIncrement: Int32

    /// A piece of work and the group it was given in.
    private struct Item {
        var work: @Sendable () -> Void
        var group: DispatchGroup
    }

    private struct Queue {
        var items: [Item] = []
        var started = false
        /// The thread's nice value once it has lowered itself (for tests).
        var nice: Int32?
    }

    package init(niceIncrement: Int32) {
        self.niceIncrement = niceIncrement
    }

    /// Runs `work` on the thread after the work given before it, inside `group` (entered now, left
    /// once `work` has returned and been released: what it captured, a segment file say, is let go
    /// by then), so that waiting for the group waits for it.
    package func async(group: DispatchGroup, _ work: @escaping @Sendable () -> Void) {
        group.enter()
        let start = queue.withLock { queue, waiter -> Bool in
            queue.items.append(Item(work: work, group: group))
            waiter.broadcast()
            defer { queue.started = true }
            return !queue.started
        }
        if start {
            Thread { [self] in run() }.start()
        }
    }

    /// The thread's nice value, once it has started and lowered itself; nil before.
    package var nice: Int32? {
        queue.withLock { queue, _ in queue.nice }
    }

    /// The thread's name, as `top -H` and `ps -L` show it (at most 15 bytes).
    package static let threadName = "cask.lowprio"

    private func run() {
        _ = cask_name_this_thread(Self.threadName)
        // On Linux the nice value is the calling thread's, not the process's (setpriority(2)).
        errno = 0
        let current = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        let lowered = min(19, (errno == 0 ? current : 0) + niceIncrement)
        // A failure leaves the thread at its priority: the work is only slower to give way.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, lowered)
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        queue.withLock { queue, _ in queue.nice = nice }
        while true {
            var item: Item? = queue.withLock { queue, waiter in
                while queue.items.isEmpty { waiter.wait() }
                return queue.items.removeFirst()
            }
            let group = item!.group
            item!.work()
            // Released before the group is left: a caller that waited for the group and then finds
            // a file still open (a compaction's retired input, held by a hint job) would be wrong.
            item = nil
            group.leave()
        }
    }
}
