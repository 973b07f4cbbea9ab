#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a `pthread_mutex_t`, reachable only inside `withLock`.
///
/// Unlike `Synchronization.Mutex` it is a class (so a store can hold an optional one) and its
/// closure takes no `sending` value (so readers can decode straight out of the writer's buffer).
/// The value must not escape the closure; that is what makes the `@unchecked Sendable` sound.
package final class Lock<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Reached only under the lock, which already excludes overlapping access.
    @exclusivity(unchecked) private var value: Value

    package init(_ value: consuming Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        precondition(pthread_mutex_init(mutex, nil) == 0)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
