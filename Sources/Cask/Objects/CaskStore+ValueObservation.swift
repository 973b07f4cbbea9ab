/// Following a value: its current state first, then its state after every change, with no gap.
extension CaskStore {
    /// The value of `key` decoded as `T` now (nil when absent), then again after every change to it
    /// — put, delete, expiry — in commit order, until the store closes or the consumer stops.
    ///
    /// ```swift
    /// for try await user in store.observe(Profile.self, forKey: "current-user") { show(user) }
    /// ```
    ///
    /// **No gap.** The stream subscribes to the key's changes before it reads the first value: a
    /// write is in the index before its change goes out, so each write is in the first value or
    /// yields again after it (or both). Each later value is read when its change is processed, so a
    /// consumer that falls behind may see the same (newest) value more than once, never an older one
    /// after a newer.
    ///
    /// **Buffering.** Changes wait, without bound, for the reads that turn them into values; values
    /// are buffered for the consumer by `bufferingPolicy` (default: every one; `.bufferingNewest(1)`
    /// keeps only the latest for a screen that shows one). Writers never wait.
    ///
    /// **Errors.** A value that does not decode, or any other read error, ends the stream with that
    /// error (a ``CaskError``). Reads go through the decoded-object cache, if there is one. Costs one
    /// get and decode per change, on a task of its own.
    public func observe<T: Decodable & Sendable>(
        _ type: T.Type, forKey key: String, coder: ObjectCoder? = nil,
        bufferingPolicy: AsyncThrowingStream<T?, any Error>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncThrowingStream<T?, any Error> {
        let (values, continuation) = AsyncThrowingStream<T?, any Error>.makeStream(bufferingPolicy: bufferingPolicy)
        let subscription = changes(forKey: key)
        switch Result(catching: { () throws(CaskError) in try get(T.self, forKey: key, coder: coder) }) {
        case .success(let value): continuation.yield(value)
        case .failure(let error):
            continuation.finish(throwing: error)
            return values
        }
        let follower = Task {
            for await _ in subscription {
                do throws(CaskError) {
                    continuation.yield(try get(T.self, forKey: key, coder: coder))
                } catch .closed {
                    break  // the store closed after the change: the stream ends as the changes do
                } catch {
                    continuation.finish(throwing: error)
                    return
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in follower.cancel() }
        return values
    }
}
