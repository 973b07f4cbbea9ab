import Foundation

extension CaskStore {
    /// The store's writes, `sync()` and `compact()` for Swift concurrency: they suspend the task
    /// where the plain calls block the thread.
    ///
    /// In `.fsync` mode a plain put blocks its thread through the `fdatasync` (and the wait for
    /// the writers it shares one with); from a task that is a thread of Swift's cooperative pool,
    /// of which there is one per core, so a few durable writers stall every other task of the
    /// process. Here a write takes the writer mutex for the same brief instant as a plain one (it
    /// is in the store, visible to readers, when it suspends), then suspends until a sync covers
    /// it: the syncs run on one thread of the store's own, one `fdatasync` for every write that
    /// came while the last one ran, shared with blocking writers (group commit). `compact()` runs
    /// on a thread of its own. Durability, atomicity and errors are the plain calls': a write
    /// returns once durable, or throws the failed sync's ``CaskError/syncFailed(path:errno:)``, as
    /// every write after it does. In `.os` and `.buffered` modes, whose writes never wait for the
    /// disk, the writes are the plain ones. Thread-safe; cancelling the task does not cancel a
    /// write (once in the store, it is kept).
    ///
    /// ```swift
    /// try await store.suspending.put("session/token", token)    // durable on return in .fsync mode
    /// ```
    public struct Suspending: Sendable {
        let store: CaskStore

        /// As ``CaskStore/put(_:_:)-(some Collection<UInt8>,some Collection<UInt8>)``.
        public func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>) async throws(CaskError) {
            try await put(key, value, expiresAt: nil)
        }

        /// Sets the UTF-8 bytes of `key` to `value`.
        public func put(_ key: String, _ value: some Collection<UInt8>) async throws(CaskError) {
            try await put(key.utf8, value, expiresAt: nil)
        }

        /// As ``CaskStore/put(_:_:expiresAfter:)-(some Collection<UInt8>,_,_)``: `key` reads as
        /// absent from `duration` from now on.
        public func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAfter duration: Duration) async throws(CaskError) {
            try await put(key, value, expiresAt: duration.expiry(after: CaskStore.nowMilliseconds()))
        }

        public func put(_ key: String, _ value: some Collection<UInt8>, expiresAfter duration: Duration) async throws(CaskError) {
            try await put(key.utf8, value, expiresAfter: duration)
        }

        private func put(_ key: some Collection<UInt8>, _ value: some Collection<UInt8>, expiresAt: UInt64?) async throws(CaskError) {
            let target = try CaskStore.withContiguousBytes(key) { (key) throws(CaskError) in
                try CaskStore.withContiguousBytes(value) { (value) throws(CaskError) in
                    try store.validate(key: key, valueLength: value.count)
                    return try store.appendWithoutWaiting(SingleWrite(type: .put, key: key, value: value, expiresAt: expiresAt))
                }
            }
            try await store.waitUntilDurable(target)
        }

        /// As ``CaskStore/delete(_:)-(some Collection<UInt8>)``: returns whether the key existed.
        @discardableResult
        public func delete(_ key: some Collection<UInt8>) async throws(CaskError) -> Bool {
            let target = try CaskStore.withContiguousBytes(key) { (key) throws(CaskError) in
                try store.validate(key: key, valueLength: 0)
                return try store.appendWithoutWaiting(SingleWrite(type: .delete, key: key, value: UnsafeRawBufferPointer(start: nil, count: 0), expiresAt: nil))
            }
            try await store.waitUntilDurable(target)
            return target != nil
        }

        @discardableResult
        public func delete(_ key: String) async throws(CaskError) -> Bool {
            try await delete(key.utf8)
        }

        /// As ``CaskStore/set(_:forKey:coder:)``: `value` encoded with `coder` (default: the
        /// store's); an optional that is `nil` deletes the key.
        public func set<T: Encodable>(_ value: T, forKey key: String, coder: ObjectCoder? = nil) async throws(CaskError) {
            try await set(value, forKey: key, coder: coder, expiresAt: nil)
        }

        /// As ``CaskStore/set(_:forKey:expiresAfter:coder:)``.
        public func set<T: Encodable>(_ value: T, forKey key: String, expiresAfter duration: Duration, coder: ObjectCoder? = nil) async throws(CaskError) {
            try await set(value, forKey: key, coder: coder, expiresAt: duration.expiry(after: CaskStore.nowMilliseconds()))
        }

        /// As ``CaskStore/set(_:for:)``: for an optional value, `nil` deletes the key.
        public func set<Value>(_ value: Value, for key: CaskStore.Key<Value>) async throws(CaskError) {
            try await set(value, forKey: key.name, coder: key.coder, expiresAt: nil)
        }

        /// As ``CaskStore/removeValue(for:)``: returns whether the key had a value.
        @discardableResult
        public func removeValue<Value>(for key: CaskStore.Key<Value>) async throws(CaskError) -> Bool {
            try await delete(key.name)
        }

        private func set<T: Encodable>(_ value: T, forKey key: String, coder: ObjectCoder?, expiresAt: UInt64?) async throws(CaskError) {
            if let optional = value as? any ObjectOptionalValue, optional.isNone {
                try await delete(key)
                return
            }
            let target = try store.withEncodedObject(value, forKey: key, coder: coder ?? store.options.objects.coder) { (bytes) throws(CaskError) in
                try CaskStore.withContiguousBytes(key.utf8) { (keyBytes) throws(CaskError) in
                    try store.validate(key: keyBytes, valueLength: bytes.count)
                    return try store.appendWithoutWaiting(SingleWrite(type: .put, key: keyBytes, value: bytes, expiresAt: expiresAt))
                }
            }
            try await store.waitUntilDurable(target)
        }

        /// As ``CaskStore/write(_:)``: every operation of `batch`, or none.
        public func write(_ batch: WriteBatch) async throws(CaskError) {
            guard let batch = try store.prepared(batch) else { return }
            try await store.waitUntilDurable(try store.appendWithoutWaiting(batch))
        }

        /// As ``CaskStore/sync()``: every write that returned before this call is durable on return.
        public func sync() async throws(CaskError) {
            guard let target = try store.syncTarget(store.writer), let writer = store.writer else { return }
            try await store.groupCommit.durable(target, force: true, writer: writer)
        }

        /// As ``CaskStore/compact(progress:)``, on a thread of its own (`progress` is called there),
        /// not one of Dispatch's: on Linux those are the Swift concurrency pool's too.
        @discardableResult
        public func compact(progress: (@Sendable (Progress) -> Void)? = nil) async throws(CaskError) -> CompactionResult {
            let store = store
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<CompactionResult, CaskError>, Never>) in
                let thread = Thread {
                    continuation.resume(returning: Result { () throws(CaskError) in try store.compact(progress: progress) })
                }
                thread.name = "cask.compact"
                thread.start()
            }
            return try result.get()
        }
    }

    /// Writes, `sync()` and `compact()` that suspend the calling task instead of blocking its
    /// thread (``Suspending``): `try await store.suspending.put(key, value)`.
    public var suspending: Suspending { Suspending(store: self) }

    /// Appends `records` (``appendRecords(_:_:)``) without waiting for a sync: returns where they
    /// end, or nil when nothing was written.
    func appendWithoutWaiting(_ records: some WriteRecords) throws(CaskError) -> SyncPosition? {
        guard let writer else {
            throw isClosed.load(ordering: .relaxed) ? CaskError.closed(path: directory) : CaskError.readOnly(path: directory)
        }
        return try appendRecords(records, writer)
    }

    /// In `.fsync` mode, suspends until `target` (if any) is durable.
    func waitUntilDurable(_ target: SyncPosition?) async throws(CaskError) {
        guard options.durability == .fsync, let target, let writer else { return }
        try await groupCommit.durable(target, force: false, writer: writer)
    }
}
