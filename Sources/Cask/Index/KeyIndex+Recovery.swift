// The key index during recovery: sequence numbers and tombstones, so that the newest record of each key wins.

extension KeyIndex {
    /// Starts recording sequence numbers so that ``recover(_:_:seq:isDelete:)`` can keep the newest
    /// version of each key regardless of the order records are seen in.
    package func beginRecovery() {
        guard seqs == nil else { return }
        seqs = Self.allocateSeqs(capacity: capacity)
        if maintainsOrder {
            maintainsOrder = false
            ordered.rebuild(from: UnsafeBufferPointer(start: nil, count: 0), arena: arena)
            reclaim()
        }
    }

    /// Applies one record found by recovery: it wins only if its seq is higher than what is known,
    /// or equal and the record lies later in (segment id, offset) order — so the outcome does not
    /// depend on the order records are seen in, and a compaction (which moves live records to
    /// higher ids) cannot change it. A delete is remembered as a tombstone until ``endRecovery()``,
    /// so that an older put of the same key seen later cannot bring the key back.
    @discardableResult
    package func recover(_ key: UnsafeRawBufferPointer, _ location: RecordLocation, seq: UInt64, isDelete: Bool) -> RecoveryOutcome {
        precondition(seqs != nil, "beginRecovery() first")
        let hash = hasher.hash(key)
        if let slot = find(key, hash: hash) {
            let known = seqs! + slot
            let old = table[slot]
            guard seq > known.pointee
                || (seq == known.pointee && Entry.place(of: location) > old.place)  // (segment, offset) order
            else { return .superseded }
            let oldWasDelete = old.isTombstone
            slots.point(slot, at: location, tombstone: isDelete)
            known.pointee = seq
            switch (oldWasDelete, isDelete) {
            case (false, true): count -= 1; tombstones += 1
            case (true, false): count += 1; tombstones -= 1
            default: break
            }
            return .replaced(old.location, wasDelete: oldWasDelete)
        }
        let slot = insertNew(key, hash: hash, location: location, tombstone: isDelete)
        seqs![slot] = seq
        if isDelete { tombstones += 1 } else { count += 1 }
        return .inserted
    }

    package enum RecoveryOutcome: Equatable {
        /// The key was new.
        case inserted
        /// The record is newer than what was known, which it replaced (a put or a delete).
        case replaced(RecordLocation, wasDelete: Bool)
        /// A newer record of the key was already known; this one is dead.
        case superseded
    }

    /// The locations of the tombstones recovery kept (deletes newer than every put of their key).
    package func forEachTombstone(_ body: (RecordLocation) -> Void) {
        for slot in 0..<capacity where control[slot] >= 0x80 {
            if table[slot].isTombstone { body(table[slot].location) }
        }
    }

    /// Drops the tombstones and the sequence numbers kept for recovery, and shrinks a table that
    /// recovery made more than twice as big as its keys need. O(n) when it shrinks.
    package func endRecovery() {
        seqs.map { TableMemory.deallocate($0) }
        seqs = nil
        if tombstones > 0 {
            for slot in 0..<capacity where control[slot] >= 0x80 && table[slot].isTombstone {
                removeSlot(slot)
            }
            tombstones = 0
        }
        // Recovery sizes the table for every record its hint files list, dead ones included: give
        // the room back when fewer than half the slots ended up used (small tables excepted).
        if capacity > Self.shrinkableCapacity && usedSlots * 2 < capacity {
            resize(toHold: count + 1, load: Self.maximumLoad, shrinking: true)
        }
        if arena.isWasteful { compactArena() }
    }
}
