#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a mutex with two condition variables, for threads that wait on a state change
/// (group commit): a shared one that many threads wait on and that is broadcast, and one for a
/// single thread at a time that waits with a deadline and is signalled (the sync leader gathering
/// writers). `@unchecked Sendable` for the same reason as ``ReadWriteLock``.
package final class ConditionLock<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private let singleCondition: UnsafeMutablePointer<pthread_cond_t>
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
        // Deadlines are on the monotonic clock (`monotonicNanoseconds()`), not the wall clock.
        var attributes = pthread_condattr_t()
        precondition(pthread_condattr_init(&attributes) == 0)
        precondition(pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC) == 0)
        singleCondition = .allocate(capacity: 1)
        singleCondition.initialize(to: pthread_cond_t())
        precondition(pthread_cond_init(singleCondition, &attributes) == 0)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(singleCondition)
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        singleCondition.deallocate()
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` under the mutex. `body` may call `wait()` on the handle it gets, which releases the
    /// mutex until another thread calls `broadcast()`, then reacquires it (callers re-check their
    /// condition in a loop: wake-ups can be spurious).
    package func withLock<R, E: Error>(_ body: (inout Value, Waiter) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value, Waiter(mutex: mutex, condition: condition, singleCondition: singleCondition))
    }

    /// Nanoseconds on the monotonic clock, the clock of ``Waiter/waitForSignal(untilNanoseconds:)``.
    package static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        // Safe: the monotonic clock counts from boot; UInt64 nanoseconds last 584 years.
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    package struct Waiter {
        fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>
        fileprivate let condition: UnsafeMutablePointer<pthread_cond_t>
        fileprivate let singleCondition: UnsafeMutablePointer<pthread_cond_t>

        /// Waits on the shared condition until `broadcast()` (or a spurious wake-up).
        package func wait() { pthread_cond_wait(condition, mutex) }
        package func broadcast() { pthread_cond_broadcast(condition) }

        /// Waits on the single-waiter condition until `signal()`, `deadline` (``monotonicNanoseconds()``)
        /// or a spurious wake-up. One thread at a time may wait here.
        package func waitForSignal(untilNanoseconds deadline: UInt64) {
            var time = timespec(tv_sec: time_t(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            pthread_cond_timedwait(singleCondition, mutex, &time)
        }

        package func signal() { pthread_cond_signal(singleCondition) }
    }
}
