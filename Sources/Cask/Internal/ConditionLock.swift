#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a mutex with a condition variable, for threads that wait on a state change
/// (group commit). `@unchecked Sendable` for the same reason as ``ReadWriteLock``.
package final class ConditionLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Reached only under the lock, which already excludes overlapping access.
    @exclusivity(unchecked) private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        precondition(pthread_mutex_init(mutex, nil) == 0)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        precondition(pthread_cond_init(condition, nil) == 0)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` under the mutex. `body` may call `wait()` on the handle it gets, which releases the
    /// mutex until another thread calls `broadcast()`, then reacquires it (callers re-check their
    /// condition in a loop: wake-ups can be spurious).
    package func withLock<R, E: Error>(_ body: (inout Value, Waiter) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value, Waiter(mutex: mutex, condition: condition))
    }

    package struct Waiter {
        fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>
        fileprivate let condition: UnsafeMutablePointer<pthread_cond_t>
        package func wait() { pthread_cond_wait(condition, mutex) }
        package func broadcast() { pthread_cond_broadcast(condition) }
    }
}
