import CCaskCPU
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An object guarded by a `pthread_rwlock_t`: many readers at once, or one writer; writers first.
///
/// The object is reachable only inside `read`/`write` closures, which must not let it escape, and
/// which must change it only in `write`. This is the one place the store's shared state crosses
/// threads, hence `@unchecked Sendable`.
///
/// The object is a class instance held in a `let`, so that the closures borrow it in place. (A
/// struct lent from a stored property is copied for the call: on the store's read path that was a
/// retain and a release of each of its references, about a fifth of a cached get.)
package final class ReadWriteLock<Value: AnyObject>: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>
    private let value: Value

    package init(_ value: Value) {
        self.value = value
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        // Writers first: a waiting writer holds up readers that come after it, so that readers
        // taking the lock one slice after another (a listing) cannot keep a writer out. The price:
        // a thread must never take the read lock twice (a writer waiting in between would deadlock).
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        precondition(pthread_rwlock_init(lock, &attributes) == 0)
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    package func read<R, E: Error>(_ body: (Value) throws(E) -> R) throws(E) -> R {
        if pthread_rwlock_tryrdlock(lock) != 0 { acquire(exclusive: false) }
        defer { pthread_rwlock_unlock(lock) }
        return try body(value)
    }

    /// Lends the object without the lock, for the parts of it that synchronize readers on their
    /// own (the index's and the segment table's lock-free lookups, inside
    /// ``ReaderRegistry/read(_:)``): nothing else of it may be touched. Lent, not returned, so that
    /// the call costs no retain and release of the object (a count that every reader thread would
    /// write).
    @inline(__always)
    package func withoutLocking<R, E: Error>(_ body: (Value) throws(E) -> R) throws(E) -> R {
        try body(value)
    }

    package func write<R, E: Error>(_ body: (Value) throws(E) -> R) throws(E) -> R {
        if pthread_rwlock_trywrlock(lock) != 0 { acquire(exclusive: true) }
        defer { pthread_rwlock_unlock(lock) }
        return try body(value)
    }

    /// How long a thread that finds the lock taken tries again before it sleeps in the kernel.
    /// Holders keep it for microseconds (a put's index update, a listing's slice of 64 keys), and
    /// waking a sleeper took 10–50 µs here, which is what a put waited for when another thread
    /// listed without pause (p99 60 µs against 0.8 µs alone). A spinner that fails to get in is
    /// not a waiting writer to the kernel's lock, so readers are not held up meanwhile; once it
    /// sleeps, it is.
    private static var spinNanoseconds: UInt64 { 20_000 }

    @inline(never)
    private func acquire(exclusive: Bool) {
        let deadline = Self.now() &+ Self.spinNanoseconds
        var tries = 0
        while true {
            cask_cpu_relax()
            if (exclusive ? pthread_rwlock_trywrlock(lock) : pthread_rwlock_tryrdlock(lock)) == 0 { return }
            tries &+= 1
            if tries & 15 == 0 && Self.now() > deadline { break }
        }
        if exclusive { pthread_rwlock_wrlock(lock) } else { pthread_rwlock_rdlock(lock) }
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
