import Synchronization

/// The in-memory hash index: key bytes -> location of the key's latest record.
///
/// Layout, chosen so that a lookup costs one cache miss in the index and the index at most 32 bytes
/// per key beyond the key bytes:
/// - `control`: one byte per slot: 0 empty, 1 deleted, 0x80 | 7 hash bits for a full slot. Slots
///   form aligned groups of 8, and probing reads a group's 8 bytes at once, so a miss rarely touches
///   anything else. The array is small (1 to 1.7 bytes per key) and stays in the CPU's caches.
/// - `table`: one 16-byte entry per slot, in the slot itself: segment and offset (one word), arena
///   position of the key, length, and two more hash bits that a tag match is checked against before
///   the key is read. A group's entries are two cache lines, which a lookup starts loading while it probes the
///   group's control bytes, so the two misses overlap (the old layout, a slot holding the number of
///   an entry kept elsewhere, made them two misses one after the other).
/// - `arena`: the key bytes (``KeyArena``).
/// - `ordered`: the keys in byte order (``OrderedKeys``), for range and prefix walks; 12 bytes per
///   key at its leaves' fill, built when a walk first needs it (``buildOrderedView()``), then
///   updated when a key is created or deleted (an overwrite keeps its place); dropped when
///   recovery begins.
///
/// Probing is double hashing over groups: the hash picks a home group and a step, and the number of
/// groups is prime, so the path visits every group. A key is in the first group of its path that
/// had a free slot when it was inserted, which at the loads allowed (at most 7/8) is its home group
/// for all but a few percent of keys. Any number of groups works (the home group is the high word of
/// hash × groups), so growing sizes the table for a load of 0.6, about 1.46× from 7/8, not 2×. Per key
/// that is 17 / load (19.4 to 28.3) bytes plus 1 (length prefix) plus the last arena chunk's slack,
/// i.e. 20 to 30 bytes from about 200,000 keys on. Sequence numbers are kept only while recovery
/// needs them (``beginRecovery()``), 8 bytes per slot.
///
/// Thread-safety: the store guards it with a reader-writer lock, with three exceptions. Walks of
/// the ordered view without the lock (``sliceWithoutLock(_:descending:limit:keys:ends:)``) run beside
/// every update but recovery's, validating what they read against the nodes' versions; memory they
/// may hold is freed only after ``ReaderRegistry/waitForReaders()`` (``reclaimIfNeeded()``). Compaction's
/// ``switchLocation(_:from:to:)`` runs beside locked readers, storing an entry's segment-and-offset
/// word in one piece while lookups load it in one piece. And the `…WithoutLock` probes run beside
/// every update, on the table as last published (``SlotTable`` stores and loads the fields they
/// read atomically; a grown-out table is freed only after ``ReaderRegistry/waitForReaders()``).
/// Stored properties opt out of dynamic exclusivity checks (`@exclusivity(unchecked)`): the lock
/// already rules out overlapping access, and the checks cost about a tenth of a put. Complexity:
/// expected O(1 + key length) per operation; growth rehashes in O(n), reading each key once from
/// the arena.
package final class KeyIndex {
    typealias Entry = SlotEntry

    private static let empty = SlotTable.empty, deleted = SlotTable.deleted
    static let groupWidth = SlotTable.groupWidth
    /// Load after growing; ``maximumLoad`` is the most the table allows (full and deleted slots counted).
    private static let loadAfterGrowth = 0.6
    static let maximumLoad = 0.875
    /// Below this many slots, recovery leaves the table as big as it made it.
    static let shrinkableCapacity = 1 << 16
    /// Slots ahead of a sequential walk whose keys are prefetched from the arena.
    private static let walkPrefetchDistance = 16

    let hasher: KeyHasher
    /// The table, as the index uses it under the store's lock.
    @exclusivity(unchecked) private(set) var slots: SlotTable
    /// A copy of `slots` in memory of its own, for probes without the lock
    /// (``probableLocationWithoutLock(_:)``): replaced when the table is, and freed, with the table
    /// it describes, only after ``ReaderRegistry/waitForReaders()``.
    private let published: Atomic<UnsafeMutablePointer<SlotTable>>
    let readers: ReaderRegistry
    var control: UnsafeMutablePointer<UInt8> { slots.control }
    var table: UnsafeMutablePointer<Entry> { slots.entries }
    var capacity: Int { slots.capacity }
    @exclusivity(unchecked) private(set) var usedSlots = 0  // full + deleted
    @exclusivity(unchecked) package internal(set) var count = 0
    @exclusivity(unchecked) var tombstones = 0

    @exclusivity(unchecked) var arena = KeyArena()
    @exclusivity(unchecked) var ordered: OrderedKeys
    /// Whether the ordered view exists (and is kept up by every insert and removal): from the
    /// first ordered walk (``buildOrderedView()``) on, until recovery begins.
    @exclusivity(unchecked) var maintainsOrder = false {
        didSet { cask_store_word_release(viewCells + Self.readyCell, maintainsOrder ? 1 : 0) }
    }
    /// What walks without the lock start from, in a cache line of its own: the ordered view's root
    /// (``OrderedKeys/rootCell``), the arena's reader table (``KeyArena/readerTable``, stored by
    /// ``publishArena()``), a generation that is odd while the arena and the view are being
    /// replaced together (``compactArena()``), and whether the view exists.
    let viewCells: UnsafeMutableRawPointer
    static let rootCell = 0, arenaCell = 8, generationCell = 16, readyCell = 24
    /// Retired nodes beyond which an update waits for the readers to free them.
    private static let retiredLimit = 64

    /// One sequence number per slot, while recovery runs.
    @exclusivity(unchecked) var seqs: UnsafeMutablePointer<UInt64>?

    package init(hasher: KeyHasher = KeyHasher(), minimumCapacity: Int = 1024, readers: ReaderRegistry = .shared) {
        assert(MemoryLayout<Entry>.offset(of: \.place) == 0 && MemoryLayout<Entry>.offset(of: \.keyPosition) == Entry.keyPositionOffset
            && MemoryLayout<Entry>.offset(of: \.bits) == Entry.bitsOffset)
        self.hasher = hasher
        self.readers = readers
        slots = SlotTable(groups: Self.prime(atLeast: minimumCapacity * 8 / 7 / Self.groupWidth + 1))
        published = Atomic(Self.box(slots))
        viewCells = TableMemory.allocate(byteCount: 64)
        viewCells.initializeMemory(as: UInt64.self, repeating: 0, count: 8)
        ordered = OrderedKeys(rootCell: (viewCells + Self.rootCell).assumingMemoryBound(to: UnsafeMutableRawPointer?.self))
        cask_store_pointer_release((viewCells + Self.arenaCell).assumingMemoryBound(to: UnsafeMutableRawPointer?.self), arena.readerTable)
    }

    deinit {
        TableMemory.deallocate(viewCells)
        slots.deallocate()
        Self.unbox(published.load(ordering: .relaxed))
        seqs.map { TableMemory.deallocate($0) }
    }

    /// Bytes of memory the index holds (tables, arena), for the per-key figure.
    package var memoryBytes: Int {
        capacity + capacity * MemoryLayout<Entry>.stride + arena.memoryBytes + ordered.memoryBytes
            + (seqs == nil ? 0 : capacity * 8)
    }

    /// Test-only: the number of slots in the table.
    package var slotCount: Int { capacity }

    /// Key bytes held (without length prefixes or garbage).
    @exclusivity(unchecked) package private(set) var totalKeyBytes = 0

    // MARK: Lookup and update

    package func lookup(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key)) else { return nil }
        return bits(ofSlot: slot) & Entry.tombstoneBit != 0 ? nil : location(ofSlot: slot)
    }

    /// The location in the first entry on `key`'s probe path whose 9 bits of hash match (the tag
    /// and the entry's check bits), without reading the stored key; nil means `key` is absent.
    ///
    /// Saves the dependent cache miss of the key's bytes in the arena for a caller that checks the
    /// key anyway: a record carries its key, so a get compares the key in the record it reads and
    /// falls back to ``lookup(_:)`` when it differs (an entry of another key with the same bits
    /// came first on the path: about 1% of lookups at the table's loads).
    package func probableLocation(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = firstMatch(key, skipping: 0, in: slots) else { return nil }
        // A tombstone exists only while recovery runs; let the exact lookup judge it.
        return bits(ofSlot: slot) & Entry.tombstoneBit != 0 ? lookup(key) : location(ofSlot: slot)
    }

    /// What a probe without the lock found (``probableLocationWithoutLock(_:)``).
    package enum UnlockedProbe: Equatable {
        case absent
        case location(RecordLocation)
        /// Only a probe under the lock can tell (a tombstone, which exists while recovery runs).
        case unsure
    }

    /// ``probableLocation(_:)`` without the store's lock, beside the writer's updates (but not
    /// beside recovery's): inside ``ReaderRegistry/read(_:)``, on the table published last.
    ///
    /// What it returns held at some instant during the call, but for one case the caller's record
    /// check catches: an entry is stored field by field, so a probe beside an overwrite can pair the
    /// old record's segment and offset with the new one's length (or the reverse), and beside a
    /// slot's reuse can take another key's entry. A record read with the wrong length fails its
    /// checksum, another key's record fails the key check; the caller then asks under the lock.
    /// Stores nothing that another thread loads. O(1) expected.
    ///
    /// `skipping`: the number of matching entries to pass over first, for a caller whose record
    /// check found another key at the ones before (whose tag and check bits equal this key's).
    package func probableLocationWithoutLock(_ key: UnsafeRawBufferPointer, skipping: Int = 0) -> UnlockedProbe {
        let table = published.load(ordering: .sequentiallyConsistent).pointee
        guard let slot = firstMatch(key, skipping: skipping, in: table) else { return .absent }
        let bits = table.bits(ofSlot: slot)
        if bits & Entry.tombstoneBit != 0 { return .unsure }
        return .location(Entry.location(place: table.place(ofSlot: slot), bits: bits))
    }

    /// The first slot on `key`'s path in `table` whose tag and check bits match, after `skipping`
    /// others: what both probable locations read.
    @inline(__always)
    private func firstMatch(_ key: UnsafeRawBufferPointer, skipping: Int, in table: SlotTable) -> Int? {
        let hash = hasher.hash(key)
        // The entry is most likely in the home group: start loading its two lines now, so that
        // their misses overlap the probe of the control bytes.
        let home = table.homeGroup(hash) &* Self.groupWidth  // Safe: below capacity.
        cask_prefetch_for_read(table.entries + home)
        cask_prefetch_for_read(table.entries + home + Self.groupWidth / 2)
        return find(key, hash: hash, matching: .tag(skipping: skipping), in: table)
    }

    /// Starts loading the lines a probe of `key` without the lock reads first (its home group's
    /// control bytes and entries, in the table published last), for a caller that will look it up
    /// soon. Only inside ``ReaderRegistry/read(_:)`` (it loads the published table); a prefetch
    /// never faults.
    @inline(__always)
    package func prefetchWithoutLock(_ key: UnsafeRawBufferPointer) {
        let table = published.load(ordering: .sequentiallyConsistent).pointee
        let home = table.homeGroup(hasher.hash(key)) &* Self.groupWidth  // Safe: below capacity.
        cask_prefetch_for_read(table.control + home)
        cask_prefetch_for_read(table.entries + home)
        cask_prefetch_for_read(table.entries + home + Self.groupWidth / 2)
    }

    /// Whether `key`'s entry points at `location`, without the lock (as
    /// ``probableLocationWithoutLock(_:skipping:)``), reading no stored key: only the key's own
    /// entry can point at a record of it. True means it did at some instant during the call; false
    /// that it did not, or that a write was moving it elsewhere (an entry never comes back to a
    /// record it left).
    package func pointsWithoutLock(_ key: UnsafeRawBufferPointer, at location: RecordLocation) -> Bool {
        let table = published.load(ordering: .sequentiallyConsistent).pointee
        return find(key, hash: hasher.hash(key), matching: .location(location), in: table) != nil
    }

    /// Starts loading the cache lines an ``upsert(_:_:)`` or a ``recover(_:_:seq:isDelete:)`` of
    /// `key` reads first (its home group's control bytes and entries, and while recovery runs its
    /// sequence numbers), so that the misses overlap whatever the caller does before the update.
    ///
    /// Needs no lock against readers; the caller must rule out a concurrent upsert (the table moves
    /// only when an upsert grows it). A prefetch never faults.
    package func prefetch(_ key: UnsafeRawBufferPointer) {
        let home = slots.homeGroup(hasher.hash(key)) &* Self.groupWidth  // Safe: below capacity.
        cask_prefetch_for_write(control + home)
        cask_prefetch_for_write(table + home)
        cask_prefetch_for_write(table + home + Self.groupWidth / 2)
        if let seqs { cask_prefetch_for_write(seqs + home) }
    }

    /// Points `key` at `location`; returns the location it replaced, if any.
    @discardableResult
    package func upsert(_ key: UnsafeRawBufferPointer, _ location: RecordLocation) -> RecordLocation? {
        let hash = hasher.hash(key)
        if let slot = find(key, hash: hash) {
            let old = table[slot]
            slots.point(slot, at: location, tombstone: false)
            if old.isTombstone {
                tombstones -= 1
                count += 1
                return nil
            }
            return old.location
        }
        insertNew(key, hash: hash, location: location)
        count += 1
        return nil
    }

    /// Removes `key`; returns the location it had, if any.
    @discardableResult
    package func remove(_ key: UnsafeRawBufferPointer) -> RecordLocation? {
        guard let slot = find(key, hash: hasher.hash(key)) else { return nil }
        let old = table[slot]
        removeSlot(slot)
        if old.isTombstone { tombstones -= 1; return nil }
        count -= 1
        return old.location
    }

    /// Removes `key` only if it still points at `expected` (compare-and-delete).
    @discardableResult
    package func remove(_ key: UnsafeRawBufferPointer, ifAt expected: RecordLocation) -> Bool {
        guard let slot = find(key, hash: hasher.hash(key), matching: .location(expected)) else { return false }
        removeSlot(slot)
        count -= 1
        return true
    }

    /// Points `key` at `new` only if it still points at `expected` (compare-and-set), for a record
    /// that compaction copied to `new`.
    ///
    /// When the two locations have the same length (a record copied whole), this is the one update
    /// that may run while locked readers use the index, under the store's shared lock: it stores
    /// only the entry's segment-and-offset word, in one piece, and every read of an entry loads that
    /// word in one piece (``place(ofSlot:)``) and the rest, which this never changes, on its own. A
    /// reader beside it gets the old location or the new one, never a mix, and both hold the same
    /// record. When the lengths differ (a record compressed again) the length changes too, and the
    /// caller must hold the exclusive lock; a lock-free probe may then load a mix, which its record
    /// checks reject. Either way the caller must rule out every other update meanwhile (the store
    /// holds its writer mutex, which all other updates take first). O(1) expected; reads no stored key.
    @discardableResult
    package func switchLocation(_ key: UnsafeRawBufferPointer, from expected: RecordLocation, to new: RecordLocation) -> Bool {
        guard let slot = find(key, hash: hasher.hash(key), matching: .location(expected)) else { return false }
        if new.length == expected.length {
            slots.setPlace(slot, Entry.place(of: new))
        } else {
            slots.point(slot, at: new, tombstone: false)
        }
        return true
    }

    /// Calls `body` with every live key and its location, in no particular order.
    /// The key pointer is valid only during the call.
    package func forEach(_ body: (UnsafeRawBufferPointer, RecordLocation) throws -> Void) rethrows {
        for slot in 0..<capacity {
            prefetchKey(ofSlot: slot + Self.walkPrefetchDistance)
            guard control[slot] >= 0x80, bits(ofSlot: slot) & Entry.tombstoneBit == 0 else { continue }
            try body(keyBytes(at: keyPosition(ofSlot: slot)), location(ofSlot: slot))
        }
    }

    // MARK: Internals

    /// Sequence numbers for `capacity` slots, all 0, aligned like the table (a group's are one line).
    static func allocateSeqs(capacity: Int) -> UnsafeMutablePointer<UInt64> {
        TableMemory.allocate(byteCount: capacity * 8).initializeMemory(as: UInt64.self, repeating: 0, count: capacity)
    }

    /// The smallest prime at least `n` (and at least 2), by trial division: O(√n), a few thousand
    /// divisions for the largest tables, once per growth.
    static func prime(atLeast n: Int) -> Int {
        var candidate = Swift.max(n, 2)
        while true {
            var divisor = 2
            var isPrime = true
            while divisor * divisor <= candidate {
                if candidate % divisor == 0 { isPrime = false; break }
                divisor += divisor == 2 ? 1 : 2
            }
            if isPrime { return candidate }
            candidate += 1
        }
    }

    @discardableResult
    func insertNew(_ key: UnsafeRawBufferPointer, hash: UInt64, location: RecordLocation, tombstone: Bool = false) -> Int {
        if (usedSlots + 1) * 8 > capacity * 7 { resize(toHold: count + tombstones + 1) }
        let slot = freeSlot(for: hash)
        if control[slot] == Self.empty { usedSlots += 1 }
        let position = arena.store(key)
        publishArena()
        slots.store(Entry(keyPosition: position, location: location, check: Self.checkBits(hash), tombstone: tombstone),
                    control: Self.tag(hash), at: slot)
        if maintainsOrder { ordered.insert(key, at: position, arena: arena) }
        totalKeyBytes += key.count
        reclaimIfNeeded()
        return slot
    }

    func removeSlot(_ slot: Int) {
        let position = table[slot].keyPosition
        let key = arena.bytes(at: position)
        totalKeyBytes -= key.count
        if maintainsOrder {
            let removed = ordered.remove(key, at: position, arena: arena)
            precondition(removed, "a live key is in the ordered view")
        }
        arena.release(position)
        // A group with an empty slot has never been full since the last rehash, so no probe path
        // runs through it: the slot can be empty too. In a full group it must stay on the paths.
        if SlotTable.zeroBytes(slots.controlWord(slot / Self.groupWidth)) != 0 {
            slots.setControl(slot, Self.empty)
            usedSlots -= 1
        } else {
            slots.setControl(slot, Self.deleted)
        }
        if seqs == nil && arena.isWasteful { compactArena() }
        reclaimIfNeeded()
    }

    /// Stores the arena's reader table where walks without the lock find it, if it changed (it
    /// grows with the arena): before any position in a chunk it lists is published.
    @inline(__always)
    func publishArena() {
        let cell = (viewCells + Self.arenaCell).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
        if cell.pointee != arena.readerTable { cask_store_pointer_release(cell, arena.readerTable) }
    }

    /// Frees what the ordered view and the arena retired, once walks without the lock that may
    /// hold it have left (``ReaderRegistry/waitForReaders()``): at once for arena memory (chunk 0
    /// or the chunk table outgrown: a few times in an arena's life), after ``retiredLimit`` nodes
    /// for the view's (merges and emptied leaves, which deletes cause). Without an ordered view no
    /// walk reads either; the wait is then for the readers of the moment, usually none.
    @inline(__always)
    func reclaimIfNeeded() {
        guard !arena.retired.isEmpty || ordered.retired.count >= Self.retiredLimit else { return }
        reclaim()
    }

    @inline(never)
    func reclaim() {
        readers.waitForReaders()
        arena.freeRetired()
        ordered.freeRetired()
    }

    @inline(__always)
    func keyBytes(at position: UInt32) -> UnsafeRawBufferPointer { arena.bytes(at: position) }

    /// Starts loading the key of `slot`, if it is a full slot of the table, for a walk in slot
    /// order (the keys lie in the arena in insertion order, so such a walk reads them at random).
    @inline(__always)
    private func prefetchKey(ofSlot slot: Int) {
        guard slot < capacity, control[slot] >= 0x80 else { return }
        cask_prefetch_for_read(arena.address(keyPosition(ofSlot: slot)))
    }

    @inline(__always)
    private func bits(ofSlot slot: Int) -> UInt32 { slots.bits(ofSlot: slot) }

    @inline(__always)
    private func keyPosition(ofSlot slot: Int) -> UInt32 { slots.keyPosition(ofSlot: slot) }

    @inline(__always)
    func location(ofSlot slot: Int) -> RecordLocation { slots.location(ofSlot: slot) }

    /// Makes room for `keys` keys in all without growing the table again.
    /// (A known count does not need the room to grow that `resize` leaves: the table is sized to
    /// hold `keys` at a load of at most 7/8, the most the table allows.)
    package func reserve(_ keys: Int) {
        if (keys + 1) * 8 > capacity * 7 { resize(toHold: keys + 1, load: Self.maximumLoad) }
    }

    /// Rehashes into a table where `keys` keys fill `load` of the slots (or less, if the table is
    /// already bigger and not `shrinking`), dropping the deleted slots.
    func resize(toHold keys: Int, load: Double = loadAfterGrowth, shrinking: Bool = false) {
        let needed = Int((Double(keys) / load / Double(Self.groupWidth)).rounded(.up))
        let old = slots, oldSeqs = seqs
        let new = SlotTable(groups: Self.prime(atLeast: shrinking ? needed : Swift.max(old.groups, needed)))
        if oldSeqs != nil { seqs = Self.allocateSeqs(capacity: new.capacity) }
        slots = new
        usedSlots = 0
        // The new table is nobody else's yet: plain stores.
        for slot in 0..<old.capacity {
            // The walk is in slot order, the keys at random in the arena: load them ahead.
            let ahead = slot + Self.walkPrefetchDistance
            if ahead < old.capacity, old.controlByte(ahead) >= 0x80 { cask_prefetch_for_read(arena.address(old.keyPosition(ofSlot: ahead))) }
            let byte = old.controlByte(slot)
            guard byte >= 0x80 else { continue }
            let entry = old.entry(slot)
            let target = freeSlot(for: hasher.hash(keyBytes(at: entry.keyPosition)))
            new.control[target] = byte
            new.entries[target] = entry
            if let oldSeqs { seqs![target] = oldSeqs[slot] }
            usedSlots += 1
        }
        publish()
        old.deallocate()
        oldSeqs.map { TableMemory.deallocate($0) }
    }

    /// Publishes `slots` to probes without the lock, and returns once none can be using the table
    /// published before (which the caller may then free).
    private func publish() {
        let box = Self.box(slots)
        let old = published.exchange(box, ordering: .sequentiallyConsistent)
        readers.waitForReaders()
        Self.unbox(old)
    }

    /// `slots` in a cache line of its own: every get loads it, and a line shared with anything
    /// the writer stores to would miss after each put.
    private static func box(_ slots: SlotTable) -> UnsafeMutablePointer<SlotTable> {
        TableMemory.allocate(byteCount: 64).initializeMemory(as: SlotTable.self, repeating: slots, count: 1)
    }

    private static func unbox(_ box: UnsafeMutablePointer<SlotTable>) {
        box.deinitialize(count: 1)
        TableMemory.deallocate(UnsafeMutableRawPointer(box))
    }

    /// Rewrites the arena without deleted keys' bytes: in key order with an ordered view (which
    /// is rebuilt with it), in slot order without one.
    ///
    /// Walks without the lock see the generation odd meanwhile (and fall back to the lock), and
    /// the old arena is freed only after ``ReaderRegistry/waitForReaders()``.
    func compactArena() {
        let generation = viewCells + Self.generationCell
        cask_store_word_relaxed(generation, viewCells.load(fromByteOffset: Self.generationCell, as: UInt64.self) &+ 1)  // Safe: wraps after 2^63.
        cask_fence_release()
        var old = KeyArena()
        if maintainsOrder {
            rebuildInKeyOrder(compactingArena: true, replacing: &old)
        } else {
            for slot in 0..<capacity where control[slot] >= 0x80 {
                slots.setKeyPosition(slot, old.store(keyBytes(at: table[slot].keyPosition)))
            }
            swap(&old, &arena)
        }
        publishArena()
        cask_store_word_release(generation, viewCells.load(fromByteOffset: Self.generationCell, as: UInt64.self) &+ 1)  // Safe: as above.
        readers.waitForReaders()
        old.freeRetired()
        _ = consume old
        arena.freeRetired()
        ordered.freeRetired()
    }
}

import CCaskCPU
