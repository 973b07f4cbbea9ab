import CCaskCPU
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Counts the readers that run without the store's lock (a get's fast path), so that memory they
/// may be reading — an index table the index has grown out of, a retired segment's mapping — is
/// released only once they have left: a grace period, as in read-copy-update.
///
/// A reader runs inside ``read(_:)`` and reaches shared memory only through pointers that were
/// published with a sequentially consistent store and that it loads with a sequentially consistent
/// load. A writer that replaces such a pointer stores the new one, calls ``waitForReaders()``, and
/// only then frees what the old one led to.
///
/// Why that is enough: readers count themselves in one of 64 counters, each on its own 128 bytes
/// (two cache lines, so that the adjacent-line prefetcher does not pair them), picked by thread;
/// the count goes up (sequentially consistent) before the reader loads a pointer and down after its
/// last access. `waitForReaders()` waits until it has seen each counter at zero once. A reader
/// counted when the writer looked has left by then (a counter at zero has no one inside). A
/// reader the writer did not see counted came after the writer's look in the single order of
/// sequentially consistent operations, hence after the writer's store of the new pointer, which is
/// what it loads. Readers never wait and write only their own counter's line: two reader threads
/// share no line that either writes, unlike a reader-writer lock's count, which bounces between
/// cores on every read. The writer waits for the readers inside at the moment, each of which does a
/// bounded amount of work (a get copies at most a small value) — unless one is descheduled
/// meanwhile, which makes the writer wait for it to run again.
package final class ReaderRegistry: @unchecked Sendable {
    /// The one registry of the process: every store's readers count themselves here (a writer's
    /// wait may then also wait for another store's readers, each briefly).
    package static let shared = ReaderRegistry()

    private static let stripes = 64
    private static let stripeBytes = 128
    private let counts: UnsafeMutableRawPointer

    package init() {
        counts = TableMemory.allocate(byteCount: Self.stripes * Self.stripeBytes)
        counts.initializeMemory(as: UInt8.self, repeating: 0, count: Self.stripes * Self.stripeBytes)
    }

    deinit {
        TableMemory.deallocate(counts)
    }

    /// Runs `body` as a reader: memory reached through pointers it loads (sequentially consistent)
    /// stays allocated until it returns. `body` must be short and must not wait for anything
    /// (a lock, I/O other than a page fault): writers wait for it.
    @inline(__always)
    package func read<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        let count = counter(Int(truncatingIfNeeded: cask_thread_number()) & (Self.stripes - 1))
        cask_add_word_seq_cst(count, 1)
        defer { cask_add_word_release(count, -1) }
        return try body()
    }

    /// Returns once every reader that was inside ``read(_:)`` when it was called has left. Call it
    /// after publishing the pointer that replaces old memory, before freeing that memory; never
    /// from inside ``read(_:)``. O(64) loads when no reader is inside.
    package func waitForReaders() {
        for stripe in 0..<Self.stripes {
            let count = counter(stripe)
            var spins = 0
            while cask_load_int_seq_cst(count) != 0 {
                spins += 1
                // A reader inside is a few hundred nanoseconds from leaving, unless it is not running.
                if spins > 100 { sched_yield() }
            }
        }
    }

    /// Test-only: readers inside ``read(_:)`` now, over all counters.
    package var readersInside: Int {
        (0..<Self.stripes).reduce(0) { $0 + Int(cask_load_int_seq_cst(counter($1))) }
    }

    @inline(__always)
    private func counter(_ stripe: Int) -> UnsafeMutablePointer<Int64> {
        (counts + stripe &* Self.stripeBytes).assumingMemoryBound(to: Int64.self)  // Safe: stripe < stripes.
    }
}
