// The key index's probing: the hash bits a slot keeps, and the search along a key's path of groups.

extension KeyIndex {
    /// The tag of a full slot: the hash's low 7 bits (its high bits choose the home group, so the
    /// keys of one group share them) and the top bit.
    @inline(__always)
    static func tag(_ hash: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: hash) | 0x80 }

    /// Two more bits of the hash, kept in the entry (bits 29–30 of ``Entry/bits``): an entry whose
    /// tag matches is checked against them before its key is read, which cuts the needless key
    /// reads (and the wrong records a probable location leads to) by four. Hash bits 39–40, which
    /// the tag, the home group and the step do not use.
    @inline(__always)
    static func checkBits(_ hash: UInt64) -> UInt32 { (UInt32(truncatingIfNeeded: hash >> 39) & 3) << 29 }

    /// What ``find(_:hash:matching:)`` takes for the key's slot, among the slots on its path whose
    /// tag and check bits match.
    enum Match {
        /// The slot whose stored key is `key`.
        case key
        /// The first, after `skipping` others (see ``probableLocation(_:)``).
        case tag(skipping: Int)
        /// The live entry pointing at this record, without reading the stored key: only the key's
        /// own entry can, as a record holds one key. A compare-and-set then costs no arena miss.
        case location(RecordLocation)
        /// The entry whose key is stored at this arena position (each key has its own).
        case keyPosition(UInt32)
    }

    /// The slot holding `key` (as `match` says), if present, in `slots` or in `table`.
    ///
    /// A key is in the first group of its path that had a free slot when it was inserted, so the
    /// search ends at a group with an empty slot: a group that has been full since the last rehash
    /// never gets an empty slot back (``removeSlot(_:)`` marks it deleted).
    ///
    /// Beside the writer (``probableLocationWithoutLock(_:)``, `.tag` only) the search still ends:
    /// between rehashes no group gains an empty slot, and at least one group always has one (the
    /// table is at most 7/8 used), so the group that has one when the search ends had it all along,
    /// and the path reaches it within `groups` steps.
    @inline(__always)
    func find(_ key: UnsafeRawBufferPointer, hash: UInt64, matching match: Match = .key, in table: SlotTable? = nil) -> Int? {
        let table = table ?? slots
        let tag = Self.tag(hash)
        let tags = SlotTable.lowBits &* UInt64(tag)
        let check = Self.checkBits(hash)
        var group = table.homeGroup(hash)
        var step = 0, passed = 0
        while true {
            let word = table.controlWord(group)
            var matches = SlotTable.zeroBytes(word ^ tags)
            while matches != 0 {
                let byte = matches.trailingZeroBitCount >> 3
                let slot = group &* Self.groupWidth &+ byte  // Safe: below capacity.
                if UInt8(truncatingIfNeeded: word >> (byte &* 8)) == tag, case let bits = table.bits(ofSlot: slot), bits & Entry.checkMask == check {
                    switch match {
                    case .tag(let skipping): if passed == skipping { return slot } else { passed &+= 1 }
                    case .key: if keyBytes(at: table.keyPosition(ofSlot: slot)).hasSameBytes(as: key) { return slot }
                    case .location(let expected):
                        if bits & Entry.tombstoneBit == 0 && Entry.location(place: table.place(ofSlot: slot), bits: bits) == expected { return slot }
                    case .keyPosition(let position): if table.keyPosition(ofSlot: slot) == position { return slot }
                    }
                }
                matches &= matches &- 1
            }
            if SlotTable.zeroBytes(word) != 0 { return nil }
            if step == 0 { step = table.step(hash) }
            group = table.next(group, step: step)
        }
    }

    /// The first slot that is not full on the path of `hash`. The table always has one: growth
    /// keeps at least an eighth of the slots empty, and the path visits every group.
    @inline(__always)
    func freeSlot(for hash: UInt64) -> Int {
        var group = slots.homeGroup(hash)
        var step = 0
        while true {
            let free = ~slots.controlWord(group) & SlotTable.highBits  // empty (0) or deleted (1)
            if free != 0 { return group &* Self.groupWidth &+ free.trailingZeroBitCount >> 3 }  // Safe: below capacity.
            if step == 0 { step = slots.step(hash) }
            group = slots.next(group, step: step)
        }
    }
}
