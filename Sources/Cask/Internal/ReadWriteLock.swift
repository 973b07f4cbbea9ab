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
        pthread_rwlock_rdlock(lock)
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
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(value)
    }
}
