// Walks of the ordered view without the store's lock: a leaf at a time, beside the writer.

extension KeyIndex {
    /// What ``sliceWithoutLock(_:descending:limit:keys:ends:)`` did.
    package enum UnlockedSlice: Equatable {
        /// Keys were listed (perhaps none); the walk goes on over `next` (nil: no keys are left).
        case listed(next: KeySpan?)
        /// Only a walk under the lock can take this step: the ordered view does not exist, the
        /// arena and the view are being rebuilt, or the writer changed the leaf at every attempt.
        case fallBack
    }

    /// Attempts at a leaf before a walk gives up and takes the lock for it.
    static let unlockedAttempts = 8
    /// Keys ahead of the one being copied whose bytes are prefetched.
    private static let keyPrefetchDistance = 8

    /// Lists the next keys of `span`, in ascending (or descending) order, without the store's
    /// lock: those of one leaf of the ordered view from the span's start on, at most `limit`,
    /// appended to `keys`, each followed by an entry of `ends` (the length of `keys` after it). On
    /// `.fallBack` nothing is appended.
    ///
    /// Runs beside the writer's updates (but not beside recovery's), inside
    /// ``ReaderRegistry/read(_:)`` for one leaf at a time: a descent and the copy of the leaf's keys,
    /// checked against the nodes' versions (``OrderedKeys/readLeaf(root:from:descending:into:_:)``)
    /// and the arena's generation, and started again when a check fails. The keys listed are
    /// every key of the span in the leaf's range at one instant during the call, and `next` starts
    /// where the next leaf's range does (or after the last key listed, when `limit` stopped it).
    /// Stores nothing another thread loads, and takes no lock. O(log n + keys listed).
    package func sliceWithoutLock(
        _ span: KeySpan, descending: Bool, limit: Int, keys: inout ByteBuffer, ends: inout [Int]
    ) -> UnlockedSlice {
        precondition(limit > 0)
        let keysBefore = keys.count, endsBefore = ends.count
        return withUnsafeTemporaryAllocation(of: UInt32.self, capacity: OrderedKeys.capacity) { scratch in
            for _ in 0..<Self.unlockedAttempts {
                let outcome = readers.read {
                    sliceAttempt(span, descending: descending, limit: limit, positions: scratch.baseAddress!, keys: &keys, ends: &ends)
                }
                if let outcome { return outcome }
                keys.count = keysBefore
                ends.removeSubrange(endsBefore...)
            }
            return .fallBack
        }
    }

    /// One attempt of ``sliceWithoutLock(_:descending:limit:keys:ends:)``, inside the reader
    /// registry: nil when a check failed (what it appended is then to be dropped).
    private func sliceAttempt(
        _ span: KeySpan, descending: Bool, limit: Int, positions: UnsafeMutablePointer<UInt32>,
        keys: inout ByteBuffer, ends: inout [Int]
    ) -> UnlockedSlice? {
        let generationWord = viewCells + Self.generationCell
        let generation = cask_load_word_acquire(generationWord)
        guard generation & 1 == 0, cask_load_word_acquire(viewCells + Self.readyCell) == 1 else { return .fallBack }
        let tableCell = (viewCells + Self.arenaCell).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
        // The table is loaded again for each key: it must be at least as new as the position.
        func keyAt(_ position: UInt32) -> UnsafeRawBufferPointer? {
            guard let table = cask_load_pointer_acquire(tableCell) else { return nil }
            return KeyArena.keyWithoutLock(at: position, table: table)
        }
        let root = (viewCells + Self.rootCell).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
        let (start, end) = descending ? (span.upper, span.lower) : (span.lower, span.upper)
        let leaf: OrderedKeys.LeafRead?
        switch start {
        case .unbounded:
            leaf = OrderedKeys.readLeaf(root: root, from: .end, descending: descending, into: positions, keyAt)
        case .included(let bound):
            leaf = bound.withUnsafeBytes { OrderedKeys.readLeaf(root: root, from: .key($0, inclusive: true), descending: descending, into: positions, keyAt) }
        case .excluded(let bound):
            leaf = bound.withUnsafeBytes { OrderedKeys.readLeaf(root: root, from: .key($0, inclusive: false), descending: descending, into: positions, keyAt) }
        }
        guard let leaf else { return nil }
        // The keys lie in the arena in the order they were written: each is loaded a few keys
        // ahead of its turn (more at once than the CPU has line buffers would stall it).
        guard let table = cask_load_pointer_acquire(tableCell) else { return nil }
        for index in 0..<Swift.min(leaf.count, Self.keyPrefetchDistance) { KeyArena.prefetchWithoutLock(positions[index], table: table) }
        var next: KeySpan?
        var listed = 0
        var reachedEnd = false
        for index in 0..<leaf.count {
            if index + Self.keyPrefetchDistance < leaf.count {
                KeyArena.prefetchWithoutLock(positions[index + Self.keyPrefetchDistance], table: table)
            }
            guard let key = keyAt(positions[index]) else { return nil }
            guard end.admits(key, asUpper: !descending) else {
                reachedEnd = true
                break
            }
            keys.append(key)
            ends.append(keys.count)
            listed += 1
            if listed == limit {
                reachedEnd = true
                if index + 1 < leaf.count || leaf.fence != nil { next = span.resuming(after: Array(key), descending: descending) }
                break
            }
        }
        if !reachedEnd, let fence = leaf.fence {
            guard let fenceKey = keyAt(fence) else { return nil }
            // The next leaf's keys: ascending, from the fence on; descending, below it.
            // (None when the fence is past the span's end: the keys beyond it are too.)
            if end.admits(fenceKey, asUpper: !descending) {
                var rest = span
                if descending { rest.upper = .excluded(Array(fenceKey)) } else { rest.lower = .included(Array(fenceKey)) }
                next = rest
            }
        }
        cask_fence_acquire()
        guard cask_load_word_relaxed(generationWord) == generation else { return nil }
        return .listed(next: next)
    }
}

import CCaskCPU
