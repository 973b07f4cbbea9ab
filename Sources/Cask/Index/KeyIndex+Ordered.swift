import CCaskCPU

// The key index's ordered view: building it, and the walks in key order over it.

extension KeyIndex {
    /// Whether the ordered view exists; walks need it (``buildOrderedView()``).
    package var hasOrderedView: Bool { maintainsOrder }

    /// Builds the ordered view from the live keys, which every insert and removal keeps up from
    /// then on: O(n) radix passes over the keys plus sorting of keys that tie in them, about a
    /// quarter of a second for a million keys. The index builds it only when a walk first needs
    /// it, so that a store that is never listed pays neither the build at open nor the tree
    /// insert of each new key. Not while recovery runs.
    package func buildOrderedView() {
        precondition(seqs == nil, "no ordered view while recovery runs")
        guard !maintainsOrder else { return }
        var unused = KeyArena()
        rebuildInKeyOrder(compactingArena: false, replacing: &unused)
        maintainsOrder = true
    }

    /// Calls `body` with each live key inside `span`, in ascending (or descending) byte order,
    /// until it returns false. The key is valid only during the call; `body` must not change the
    /// index. O(log n) to start, then O(1) amortized per key (a key's bytes are one arena read,
    /// loaded a few keys ahead). Not while recovery runs.
    package func walk(_ span: KeySpan, descending: Bool, _ body: (UnsafeRawBufferPointer) -> Bool) {
        walkPositions(span, descending: descending) { key, _ in body(key) }
    }

    /// Keys whose locations ``walkLocations(_:descending:limit:_:)`` looks up together.
    static let locatingBatch = 16

    /// As ``walk(_:descending:_:)`` for the first `limit` keys inside `span`, with each key's
    /// location: one probe of the hash table per key, which matches the entry by arena position
    /// and reads no stored key. The keys are found first, up to ``locatingBatch`` at a time, each
    /// key's home group loaded as it is found; then their entries are read, so that the probes'
    /// cache misses overlap rather than follow one another (a slice of 16 took 6 µs one by one).
    package func walkLocations(
        _ span: KeySpan, descending: Bool, limit: Int, _ body: (UnsafeRawBufferPointer, RecordLocation) -> Bool
    ) {
        precondition(limit > 0)
        withUnsafeTemporaryAllocation(of: (position: UInt32, hash: UInt64).self, capacity: Self.locatingBatch) { batch in
            var found = 0, listed = 0
            var stopped = false
            func drain() {
                for index in 0..<found where !stopped {
                    let (position, hash) = batch[index]
                    let key = keyBytes(at: position)
                    let slot = find(key, hash: hash, matching: .keyPosition(position))!
                    if !body(key, location(ofSlot: slot)) { stopped = true }
                }
                found = 0
            }
            walkPositions(span, descending: descending) { key, position in
                let hash = hasher.hash(key)
                let home = slots.homeGroup(hash) &* Self.groupWidth  // Safe: below capacity.
                cask_prefetch_for_read(control + home)
                cask_prefetch_for_read(table + home)
                cask_prefetch_for_read(table + home + Self.groupWidth / 2)
                batch[found] = (position, hash)
                found += 1
                listed += 1
                if found == Self.locatingBatch { drain() }
                return !stopped && listed < limit
            }
            drain()
        }
    }

    /// The walk both of those are: each key inside `span` with its arena position.
    private func walkPositions(_ span: KeySpan, descending: Bool, _ body: (UnsafeRawBufferPointer, UInt32) -> Bool) {
        precondition(maintainsOrder, "buildOrderedView() first")
        let (start, end) = descending ? (span.upper, span.lower) : (span.lower, span.upper)
        func run(_ from: OrderedKeys.Start) {
            ordered.walk(from: from, descending: descending, arena: arena) { position in
                let key = keyBytes(at: position)
                guard end.admits(key, asUpper: !descending) else { return false }
                return body(key, position)
            }
        }
        switch start {
        case .unbounded: run(.end)
        case .included(let bound): bound.withUnsafeBytes { run(.key($0, inclusive: true)) }
        case .excluded(let bound): bound.withUnsafeBytes { run(.key($0, inclusive: false)) }
        }
    }

    /// Test-only: traps unless the ordered view is well formed and holds exactly the live keys.
    package func checkOrderedView() {
        guard maintainsOrder else { return }
        ordered.checkInvariants(arena: arena)
        precondition(ordered.count == count, "the ordered view holds \(ordered.count) keys, the table \(count)")
    }

    /// Builds the ordered view afresh from the live keys (walking the old one, or sorting the
    /// table's keys when there is none yet), and with `compactingArena` rewrites the arena with
    /// them in key order (dropping deleted keys' bytes), so that walks in key order read it
    /// sequentially. O(n) with an ordered view; O(n) radix passes plus sorting of keys that share
    /// their first 8 bytes without one. The old arena, when rewritten, ends in `old` (an empty
    /// arena on entry) for the caller to free once walks without the lock have left.
    func rebuildInKeyOrder(compactingArena: Bool, replacing old: inout KeyArena) {
        var positions: [UInt32] = []
        positions.reserveCapacity(count)
        if maintainsOrder {
            ordered.walk(from: .end, descending: false, arena: arena) { position in
                positions.append(position)
                return true
            }
        } else {
            for slot in 0..<capacity where control[slot] >= 0x80 && !table[slot].isTombstone {
                positions.append(table[slot].keyPosition)
            }
            OrderedKeys.sort(&positions, arena: arena)
        }
        if compactingArena {
            for index in positions.indices {
                let previous = positions[index]
                let key = keyBytes(at: previous)
                let new = old.store(key)
                let slot = find(key, hash: hasher.hash(key), matching: .keyPosition(previous))!
                slots.setKeyPosition(slot, new)
                positions[index] = new
            }
            swap(&old, &arena)
        }
        positions.withUnsafeBufferPointer { ordered.rebuild(from: $0, arena: arena) }
    }
}
