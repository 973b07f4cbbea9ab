import CCaskCPU

/// The memory of ``KeyIndex``'s hash table and its shape: control bytes and entries for
/// `groups × 8` slots, and the arithmetic of a probe path over them. A plain value (two pointers
/// and a count) that the index copies; which copy owns the memory is the index's business.
///
/// Readers without a lock probe a table while the writer changes it, so every field that such a
/// probe loads — a group's control bytes, an entry's place and bits — is loaded and, once the
/// table is published, stored only atomically, one field at a time and never an entry whole. An
/// entry's fields are stored before its control byte (release) and loaded after the group's
/// control bytes (acquire): a probe that sees a new key's tag sees that key's entry.
struct SlotTable {
    /// Slots per group: the control bytes probed at once (one `UInt64`).
    static let groupWidth = 8
    static let empty: UInt8 = 0, deleted: UInt8 = 1

    let control: UnsafeMutablePointer<UInt8>
    let entries: UnsafeMutablePointer<SlotEntry>
    /// `capacity / groupWidth`, a prime.
    let groups: Int

    var capacity: Int { groups &* Self.groupWidth }

    /// Control bytes and entries for `groups` groups, all empty; both cache-line aligned, so that
    /// a group's control bytes are one load and its entries two whole lines (``TableMemory``,
    /// which also asks for huge pages). Release them with ``deallocate()``.
    init(groups: Int) {
        self.groups = groups
        let capacity = groups * Self.groupWidth
        control = TableMemory.allocate(byteCount: capacity)
            .initializeMemory(as: UInt8.self, repeating: Self.empty, count: capacity)
        entries = TableMemory.allocate(byteCount: capacity * MemoryLayout<SlotEntry>.stride)
            .bindMemory(to: SlotEntry.self, capacity: capacity)
    }

    func deallocate() {
        TableMemory.deallocate(UnsafeMutableRawPointer(control))
        TableMemory.deallocate(UnsafeMutableRawPointer(entries))
    }

    // MARK: Probe paths

    /// The group where `hash`'s probe path starts: the high word of hash × groups, which is below
    /// `groups` (Lemire's fast range reduction: any number of groups, no division).
    @inline(__always)
    func homeGroup(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: groups)).high)
    }

    /// How far `hash`'s probe path moves from one group to the next: 1 to groups - 1, from hash bits
    /// that neither the tag nor the home group use. With a prime number of groups, the path visits
    /// every group.
    @inline(__always)
    func step(_ hash: UInt64) -> Int {
        // Safe: a 32-bit value times groups - 1 (below 2^32), shifted down 32, is below groups - 1.
        1 &+ Int(truncatingIfNeeded: ((hash >> 7) & 0xFFFF_FFFF) &* UInt64(truncatingIfNeeded: groups &- 1) >> 32)
    }

    /// The next group on a probe path.
    @inline(__always)
    func next(_ group: Int, step: Int) -> Int {
        let next = group &+ step  // Safe: both below groups.
        return next >= groups ? next &- groups : next
    }

    static let lowBits: UInt64 = 0x0101_0101_0101_0101
    static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The zero bytes of `word`, as the high bit of each. The lowest bit set is exact; a bit above a
    /// zero byte can be a false one (the subtraction's borrow), so callers check each candidate.
    @inline(__always)
    static func zeroBytes(_ word: UInt64) -> UInt64 { (word &- lowBits) & ~word & highBits }

    // MARK: Loads

    /// The control bytes of group `group` as a little-endian word: slot `group * 8 + i` is byte `i`.
    @inline(__always)
    func controlWord(_ group: Int) -> UInt64 {
        UInt64(littleEndian: cask_load_word_acquire(control + group &* Self.groupWidth))  // Safe: below capacity.
    }

    /// The control byte of `slot`, for the index's own use (the writer's, or with no writer).
    @inline(__always)
    func controlByte(_ slot: Int) -> UInt8 { control[slot] }

    /// The entry's segment (high half) and offset (low half), loaded in one piece.
    @inline(__always)
    func place(ofSlot slot: Int) -> UInt64 {
        cask_load_word_acquire(entries + slot)
    }

    @inline(__always)
    func bits(ofSlot slot: Int) -> UInt32 {
        cask_load_u32_relaxed(UnsafeRawPointer(entries + slot) + SlotEntry.bitsOffset)
    }

    @inline(__always)
    func keyPosition(ofSlot slot: Int) -> UInt32 {
        UnsafeRawPointer(entries + slot).load(fromByteOffset: SlotEntry.keyPositionOffset, as: UInt32.self)
    }

    @inline(__always)
    func location(ofSlot slot: Int) -> RecordLocation {
        SlotEntry.location(place: place(ofSlot: slot), bits: bits(ofSlot: slot))
    }

    /// The entry whole, for the index's own use (the writer's, or with no writer).
    @inline(__always)
    func entry(_ slot: Int) -> SlotEntry { entries[slot] }

    // MARK: Stores (by the one writer)

    /// Stores `entry` in `slot` field by field, then its control byte.
    @inline(__always)
    func store(_ entry: SlotEntry, control byte: UInt8, at slot: Int) {
        let address = UnsafeMutableRawPointer(entries + slot)
        (address + SlotEntry.keyPositionOffset).storeBytes(of: entry.keyPosition, as: UInt32.self)
        cask_store_u32_relaxed(address + SlotEntry.bitsOffset, entry.bits)
        cask_store_word_release(address, entry.place)
        setControl(slot, byte)
    }

    @inline(__always)
    func setControl(_ slot: Int, _ byte: UInt8) {
        cask_store_byte_release(control + slot, byte)
    }

    /// Points the entry of `slot` at `location`, its length and tombstone bit first, then its place.
    @inline(__always)
    func point(_ slot: Int, at location: RecordLocation, tombstone: Bool) {
        var entry = self.entry(slot)
        entry.point(at: location, tombstone: tombstone)
        cask_store_u32_relaxed(UnsafeMutableRawPointer(entries + slot) + SlotEntry.bitsOffset, entry.bits)
        cask_store_word_release(entries + slot, entry.place)
    }

    /// Stores only the place, in one piece (a record moved whole keeps its length).
    @inline(__always)
    func setPlace(_ slot: Int, _ place: UInt64) {
        cask_store_word_release(entries + slot, place)
    }

    /// Stores only the key's arena position, which lock-free probes never load.
    @inline(__always)
    func setKeyPosition(_ slot: Int, _ position: UInt32) {
        (UnsafeMutableRawPointer(entries + slot) + SlotEntry.keyPositionOffset).storeBytes(of: position, as: UInt32.self)
    }
}

/// One slot's entry of ``SlotTable``: 16 bytes.
struct SlotEntry {
    /// The record's segment in the high 32 bits, its offset in the low 32: one word, first in the
    /// entry, stored and loaded in one piece (``SlotTable/place(ofSlot:)``).
    var place: UInt64
    /// Position of the key in the arena: chunk << 18 | offset.
    var keyPosition: UInt32
    /// The record length in bits 0–28 (a record is under 2^29 bytes), two more bits of the
    /// key's hash in 29–30 (``KeyIndex``'s check bits), and in bit 31 a tombstone kept during
    /// recovery.
    var bits: UInt32

    static let lengthMask: UInt32 = 1 << 29 - 1
    static let checkMask: UInt32 = 3 << 29
    static let tombstoneBit: UInt32 = 1 << 31
    /// Byte offsets of the fields loaded one by one (checked in `KeyIndex.init`).
    static let keyPositionOffset = 8, bitsOffset = 12

    init(keyPosition: UInt32, location: RecordLocation, check: UInt32, tombstone: Bool) {
        self.keyPosition = keyPosition
        place = Self.place(of: location)
        bits = check
        point(at: location, tombstone: tombstone)
    }

    static func place(of location: RecordLocation) -> UInt64 { UInt64(location.segmentID) << 32 | UInt64(location.offset) }

    static func location(place: UInt64, bits: UInt32) -> RecordLocation {
        RecordLocation(segmentID: UInt32(truncatingIfNeeded: place >> 32), offset: UInt32(truncatingIfNeeded: place), length: bits & lengthMask)
    }

    var isTombstone: Bool { bits & Self.tombstoneBit != 0 }
    var location: RecordLocation { Self.location(place: place, bits: bits) }
    var check: UInt32 { bits & Self.checkMask }

    mutating func point(at location: RecordLocation, tombstone: Bool) {
        precondition(location.length <= Self.lengthMask, "a record is under 2^29 bytes")
        place = Self.place(of: location)
        bits = bits & Self.checkMask | location.length | (tombstone ? Self.tombstoneBit : 0)
    }
}
