// The ordered index's nodes in raw memory, and the search key a descent compares with them.

/// A search key.
struct Probe {
    let key: UnsafeRawBufferPointer

    @inline(__always)
    init(_ key: UnsafeRawBufferPointer) { self.key = key }
}

/// A node of the tree in raw memory: a 2-byte count, a 2-byte height (0 for a leaf) and the
/// 2-byte length of the prefix its entries share (`skip`, at most 32), an 8-byte version, the
/// prefix's bytes, then `capacity` heads (8 bytes each: the key bytes after the prefix),
/// `capacity` positions (4 bytes) and, in an internal node, `capacity` child pointers. Every
/// accessor stays inside the node for indexes below `capacity`, which the tree's code guarantees
/// (counts never exceed it).
///
/// Readers without the lock (``OrderedKeys/readLeaf(_:_:)``) read nodes while the writer changes
/// them, so every store to a node is atomic (the count, skip, heads and prefix words relaxed; a
/// position or child pointer with release, so that a reader that loads it with acquire sees the
/// key bytes or node it leads to), and the writer makes the version odd before it changes a node
/// and even again after (``lockVersion()``, ``unlockVersion()``): a reader that finds the version
/// the same, and even, before and after its reads read one state of the node. The writer's own
/// loads are plain: nothing else stores to a node.
struct Node {
    let base: UnsafeMutableRawPointer?

    private static let capacity = OrderedKeys.capacity
    private static let versionOffset = 8
    private static let prefixOffset = 16
    private static let headsOffset = prefixOffset + OrderedKeys.maximumSkip
    private static let positionsOffset = headsOffset + 8 * capacity
    private static let childrenOffset = positionsOffset + 4 * capacity

    static func byteCount(height: Int) -> Int { height == 0 ? childrenOffset : childrenOffset + 8 * capacity }

    static func allocate(height: Int) -> Node {
        let base = UnsafeMutableRawPointer.allocate(byteCount: byteCount(height: height), alignment: 64)
        // Zeroed, so that a reader beside the writer never loads bytes nobody stored.
        base.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount(height: height))
        (base + prefixOffset).bindMemory(to: UInt8.self, capacity: OrderedKeys.maximumSkip)
        (base + headsOffset).bindMemory(to: UInt64.self, capacity: capacity)
        (base + positionsOffset).bindMemory(to: UInt32.self, capacity: capacity)
        if height > 0 { (base + childrenOffset).bindMemory(to: UnsafeMutableRawPointer?.self, capacity: capacity) }
        base.storeBytes(of: UInt16(height), toByteOffset: 2, as: UInt16.self)
        return Node(base: base)
    }

    @inline(__always) var count: Int { Int(base!.load(as: UInt16.self)) }
    @inline(__always) var height: Int { Int(base!.load(fromByteOffset: 2, as: UInt16.self)) }
    @inline(__always) var isLeaf: Bool { base!.load(fromByteOffset: 2, as: UInt16.self) == 0 }
    /// The length of the prefix every entry's key starts with.
    @inline(__always) var skip: Int { Int(base!.load(fromByteOffset: 4, as: UInt16.self)) }

    @inline(__always) private func setCount(_ count: Int) { cask_store_u16_relaxed(base!, UInt16(count)) }
    @inline(__always) private func setSkip(_ skip: Int) { cask_store_u16_relaxed(base! + 4, UInt16(skip)) }

    // MARK: The version

    /// The version as the writer sees it (only it stores to it).
    @inline(__always) private var version: UInt64 { base!.load(fromByteOffset: Self.versionOffset, as: UInt64.self) }

    /// A version no node in the tree has: the node was taken out and is waiting to be freed.
    static let retiredVersion = UInt64.max

    /// Whether the writer has made the version odd and not yet even again.
    @inline(__always) var isVersionLocked: Bool { version & 1 != 0 }

    /// Makes the version odd before the writer changes the node: a reader beside the change
    /// fails its validation.
    @inline(__always)
    func lockVersion() {
        cask_store_word_relaxed(base! + Self.versionOffset, version &+ 1)  // Safe: wraps after 2^63 changes at worst.
        cask_fence_release()
    }

    /// Makes the version even again once the node is changed, after every store to it.
    @inline(__always)
    func unlockVersion() { cask_store_word_release(base! + Self.versionOffset, version &+ 1) }  // Safe: as above.

    /// Marks the node taken out of the tree for good: every reader's validation of it fails.
    @inline(__always)
    func retireVersion() {
        cask_store_word_relaxed(base! + Self.versionOffset, Self.retiredVersion)
        cask_fence_release()
    }

    @inline(__always) var isRetired: Bool { version == Self.retiredVersion }

    // MARK: Stores (atomic: readers load them beside the writer)

    @inline(__always) private func storeHead(_ index: Int, _ head: UInt64) { cask_store_word_relaxed(heads + index, head) }
    @inline(__always) private func storePosition(_ index: Int, _ position: UInt32) { cask_store_u32_release(positions + index, position) }
    @inline(__always) private func storeChild(_ index: Int, _ child: UnsafeMutableRawPointer?) {
        cask_store_pointer_release(UnsafeMutableRawPointer(children + index).assumingMemoryBound(to: UnsafeMutableRawPointer?.self), child)
    }

    /// Moves entries `from..<from + count` to start at `to`, entry by entry in an order that reads
    /// each before it is overwritten (a `memmove` in atomic stores).
    @inline(__always)
    private func moveEntries(from: Int, to: Int, count: Int) {
        guard count > 0, from != to else { return }
        let leaf = isLeaf
        func move(_ offset: Int) {
            storeHead(to + offset, heads[from + offset])
            storePosition(to + offset, positions[from + offset])
            if !leaf { storeChild(to + offset, children[from + offset]) }
        }
        if to > from {
            var offset = count - 1
            while offset >= 0 { move(offset); offset -= 1 }
        } else {
            for offset in 0..<count { move(offset) }
        }
    }

    /// Stores `bytes` (at most ``OrderedKeys/maximumSkip``) as the prefix, in whole words, zeros after them.
    private func storePrefix(_ bytes: UnsafeRawBufferPointer) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: bytes) }
        withUnsafeBytes(of: words) { raw in
            for word in 0..<(OrderedKeys.maximumSkip / 8) {
                cask_store_word_relaxed(base! + Self.prefixOffset + 8 * word, raw.load(fromByteOffset: 8 * word, as: UInt64.self))
            }
        }
    }

    @inline(__always) private var prefix: UnsafeMutablePointer<UInt8> {
        (base! + Self.prefixOffset).assumingMemoryBound(to: UInt8.self)
    }
    @inline(__always) private var heads: UnsafeMutablePointer<UInt64> {
        (base! + Self.headsOffset).assumingMemoryBound(to: UInt64.self)
    }
    @inline(__always) private var positions: UnsafeMutablePointer<UInt32> {
        (base! + Self.positionsOffset).assumingMemoryBound(to: UInt32.self)
    }
    @inline(__always) private var children: UnsafeMutablePointer<UnsafeMutableRawPointer?> {
        (base! + Self.childrenOffset).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
    }

    @inline(__always) func head(_ index: Int) -> UInt64 { heads[index] }
    @inline(__always) func position(_ index: Int) -> UInt32 { positions[index] }
    @inline(__always) func child(_ index: Int) -> Node { Node(base: children[index]) }

    // MARK: The prefix

    /// `key`'s head in this node: its 8 bytes after the prefix.
    @inline(__always) func head(of key: UnsafeRawBufferPointer) -> UInt64 { OrderedKeys.head(key, from: skip) }

    /// Whether `key` starts with the node's prefix.
    func sharesPrefix(_ key: UnsafeRawBufferPointer) -> Bool {
        let skip = self.skip
        return key.count >= skip && (skip == 0 || memcmp(key.baseAddress!, prefix, skip) == 0)
    }

    /// Where `key` stands against the node's entries as the prefix tells: below zero below all of
    /// them, above zero above all, zero when it has the prefix (its head then decides).
    @inline(__always)
    func prefixOrder(_ key: UnsafeRawBufferPointer) -> Int {
        let skip = self.skip
        guard skip > 0 else { return 0 }
        let common = Swift.min(skip, key.count)
        if common > 0 {
            let order = memcmp(key.baseAddress!, prefix, common)
            if order != 0 { return Int(order) }
        }
        return key.count < skip ? -1 : 0
    }

    /// Shortens the prefix to what `key` shares with it, so that `key` can be an entry (the heads
    /// are recomputed from the prefix's bytes; no key is read).
    @inline(__always)
    func admit(_ key: UnsafeRawBufferPointer) {
        let skip = self.skip
        guard skip > 0 else { return }
        let shared = OrderedKeys.commonPrefixLength(key, UnsafeRawBufferPointer(start: prefix, count: skip))
        if shared < skip { shrinkPrefix(to: shared) }
    }

    /// Shortens the prefix to what `other`'s entries share with this node's, so that they can be
    /// entries here (then ``convertedHead(of:_:)`` gives their heads).
    func admit(from other: Node) {
        let length = Swift.min(skip, other.skip)
        let shared = OrderedKeys.commonPrefixLength(UnsafeRawBufferPointer(start: prefix, count: length),
                                                    UnsafeRawBufferPointer(start: other.prefix, count: length))
        if shared < skip { shrinkPrefix(to: shared) }
    }

    /// The head, in this node's terms, of entry `index` of `other`, whose prefix this node's
    /// prefix must begin (``admit(from:)``): the bytes of `other`'s prefix beyond this one's, then
    /// `other`'s head.
    func convertedHead(of other: Node, _ index: Int) -> UInt64 {
        let skip = self.skip, otherSkip = other.skip
        precondition(skip <= otherSkip, "admit(from:) first")
        return Self.head(prefix: other.prefix, from: skip, to: otherSkip, then: other.heads[index])
    }

    /// The head at `from` of a key whose bytes `from..<to` are `prefix`'s and whose head at `to` is `head`.
    @inline(__always)
    private static func head(prefix: UnsafeMutablePointer<UInt8>, from: Int, to: Int, then head: UInt64) -> UInt64 {
        let moved = to - from
        if moved == 0 { return head }
        var result: UInt64 = 0
        for index in 0..<Swift.min(moved, 8) { result |= UInt64(prefix[from + index]) << UInt64(56 - 8 * index) }
        return moved >= 8 ? result : result | head >> UInt64(8 * moved)
    }

    private func shrinkPrefix(to shorter: Int) {
        let skip = self.skip
        for index in 0..<count { storeHead(index, Self.head(prefix: prefix, from: shorter, to: skip, then: heads[index])) }
        setSkip(shorter)
    }

    /// Takes `other`'s prefix (for a node that will hold some of `other`'s entries, heads as they are).
    func copyPrefix(of other: Node) {
        storePrefix(UnsafeRawBufferPointer(start: other.prefix, count: OrderedKeys.maximumSkip))
        setSkip(other.skip)
    }

    /// After a split: lengthens the prefix when the node's first and last keys (so all of them)
    /// share more of it, reading every key from the arena to recompute the heads — only when the
    /// heads are about to stop telling keys apart (the first and last share 6 of their 8 bytes),
    /// so that nearly every split reads nothing (a prefix that shrank meanwhile costs nothing).
    func growPrefix(_ arena: borrowing KeyArena) {
        let count = self.count, skip = self.skip
        guard count >= 2, skip < OrderedKeys.maximumSkip else { return }
        let difference = heads[0] ^ heads[count - 1]
        let sameBytes = difference == 0 ? 8 : difference.leadingZeroBitCount / 8
        guard sameBytes >= 6 else { return }
        let first = arena.bytes(at: positions[0]), last = arena.bytes(at: positions[count - 1])
        let shared = Swift.min(OrderedKeys.maximumSkip, OrderedKeys.commonPrefixLength(first, last))
        guard shared > skip else { return }
        storePrefix(UnsafeRawBufferPointer(rebasing: first[..<shared]))
        setSkip(shared)
        for index in 0..<count { storeHead(index, OrderedKeys.head(arena.bytes(at: positions[index]), from: shared)) }
    }

    /// Fills an empty node with the keys at `positions` (sorted) and, in an internal node, their
    /// `children`: the prefix their first and last keys share, each head read from the arena.
    func fill(with positions: UnsafeBufferPointer<UInt32>, children: UnsafeBufferPointer<Node>?, arena: borrowing KeyArena) {
        let first = arena.bytes(at: positions[0]), last = arena.bytes(at: positions[positions.count - 1])
        let shared = Swift.min(OrderedKeys.maximumSkip, OrderedKeys.commonPrefixLength(first, last))
        storePrefix(UnsafeRawBufferPointer(rebasing: first[..<shared]))
        setSkip(shared)
        for (index, position) in positions.enumerated() {
            insertEntry(at: index, head: OrderedKeys.head(arena.bytes(at: position), from: shared), position: position, child: children?[index])
        }
    }

    /// Inserts `child`'s first entry, standing for it, at `index` of this internal node.
    func insertFirstEntry(of child: Node, at index: Int) {
        admit(from: child)
        insertEntry(at: index, head: convertedHead(of: child, 0), position: child.position(0), child: child)
    }

    // MARK: Entries

    /// Inserts an entry (and in an internal node its child) at `index`, shifting the rest up.
    func insertEntry(at index: Int, head: UInt64, position: UInt32, child: Node? = nil) {
        let count = self.count
        precondition(count < Self.capacity && index <= count, "node overflow")
        moveEntries(from: index, to: index + 1, count: count - index)
        storeHead(index, head)
        storePosition(index, position)
        if !isLeaf { storeChild(index, child!.base) }
        setCount(count + 1)
    }

    func removeEntry(at index: Int) {
        let count = self.count
        moveEntries(from: index + 1, to: index, count: count - index - 1)
        setCount(count - 1)
    }

    func truncate(to count: Int) { setCount(count) }

    /// Drops the first `dropped` entries of a leaf.
    func removeFirst(_ dropped: Int) {
        let count = self.count
        moveEntries(from: dropped, to: 0, count: count - dropped)
        setCount(count - dropped)
    }

    func setEntry(_ index: Int, head: UInt64, position: UInt32) {
        storeHead(index, head)
        storePosition(index, position)
    }

    // MARK: Searching

    /// Below zero when `key` (whose head here is `head`, and which has the node's prefix) sorts
    /// before entry `index`, zero when equal, above zero after it.
    @inline(__always)
    private func compare(_ key: UnsafeRawBufferPointer, head: UInt64, with index: Int, _ arena: borrowing KeyArena) -> Int {
        let entryHead = heads[index]
        if head != entryHead { return head < entryHead ? -1 : 1 }
        return OrderedKeys.compare(key, arena.bytes(at: positions[index]))
    }

    /// Starts loading the node's header, prefix, heads and positions at once (13 cache lines), as
    /// soon as a descent knows it will visit it: its misses then overlap instead of following one
    /// another (header, then heads, then positions).
    @inline(__always)
    func prefetch() {
        var offset = 0
        while offset < Self.childrenOffset {
            cask_prefetch_for_read(UnsafeRawPointer(base!) + offset)
            offset += 64
        }
    }

    /// Starts loading every line of the node's heads (8 lines for a full node) at once, so that a
    /// binary search over them waits for one miss rather than one per probe.
    @inline(__always)
    func prefetchHeads() {
        let lines = (count * 8 + 63) >> 6
        var line = 0
        while line < lines {
            cask_prefetch_for_read(UnsafeRawPointer(heads) + line << 6)
            line += 1
        }
    }

    /// In a leaf: the first index whose entry is at least the probe (`inclusive`) or above it.
    @inline(__always)
    func lowerBound(_ probe: Probe, _ arena: borrowing KeyArena, inclusive: Bool) -> Int {
        prefetchHeads()
        let order = prefixOrder(probe.key)
        if order != 0 { return order < 0 ? 0 : count }
        let head = head(of: probe.key)
        var low = 0, high = count
        while low < high {
            let middle = (low + high) >> 1
            let order = compare(probe.key, head: head, with: middle, arena)
            if order < 0 || (inclusive && order == 0) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// In an internal node: the child whose keys the probe falls among — the number of entries
    /// from 1 on that are at most the probe.
    @inline(__always)
    func route(_ probe: Probe, _ arena: borrowing KeyArena) -> Int {
        prefetchHeads()
        let order = prefixOrder(probe.key)
        if order != 0 { return order < 0 ? 0 : count - 1 }
        let head = head(of: probe.key)
        var low = 1, high = count
        while low < high {
            let middle = (low + high) >> 1
            if compare(probe.key, head: head, with: middle, arena) < 0 { high = middle } else { low = middle + 1 }
        }
        return low - 1
    }
}

// MARK: Reads beside the writer

extension Node {
    /// For a reader without the lock: the version, with everything the writer stored before it
    /// made it this. Odd: the writer is changing the node (or retired it).
    @inline(__always) var loadedVersion: UInt64 { cask_load_word_acquire(base! + Self.versionOffset) }

    /// For a reader: whether the version is still `version`, after every load the reader made
    /// before; if so, those loads saw the node as it was between the two loads of the version.
    @inline(__always)
    func isUnchanged(since version: UInt64) -> Bool {
        cask_fence_acquire()
        return cask_load_word_relaxed(base! + Self.versionOffset) == version
    }

    /// For a reader: the count, at most the capacity whatever the node held.
    @inline(__always) var loadedCount: Int { Swift.min(Int(cask_load_u16_relaxed(base!)), Self.capacity) }
    /// For a reader: the height, which a node keeps from its allocation on.
    @inline(__always) var loadedIsLeaf: Bool { height == 0 }
    @inline(__always) func loadedHead(_ index: Int) -> UInt64 { cask_load_word_relaxed(heads + index) }
    @inline(__always) func loadedPosition(_ index: Int) -> UInt32 { cask_load_u32_acquire(positions + index) }
    @inline(__always)
    func loadedChild(_ index: Int) -> Node {
        Node(base: cask_load_pointer_acquire(UnsafeRawPointer(children + index).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)))
    }

    /// For a reader: where `key` stands against the node's entries as the prefix tells (as
    /// ``prefixOrder(_:)``), and the head of `key` in this node (0 unless the order is 0).
    @inline(__always)
    func loadedPrefixOrder(_ key: UnsafeRawBufferPointer) -> (order: Int, head: UInt64) {
        let skip = Swift.min(Int(cask_load_u16_relaxed(base! + 4)), OrderedKeys.maximumSkip)
        guard skip > 0 else { return (0, OrderedKeys.head(key, from: 0)) }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            for word in 0..<(OrderedKeys.maximumSkip / 8) {
                raw.storeBytes(of: cask_load_word_relaxed(base! + Self.prefixOffset + 8 * word), toByteOffset: 8 * word, as: UInt64.self)
            }
        }
        let order = withUnsafeBytes(of: words) { prefix -> Int in
            let common = Swift.min(skip, key.count)
            if common > 0 {
                let order = memcmp(key.baseAddress!, prefix.baseAddress!, common)
                if order != 0 { return Int(order) }
            }
            return key.count < skip ? -1 : 0
        }
        return (order, order == 0 ? OrderedKeys.head(key, from: skip) : 0)
    }

    /// For a reader: the first index from `low` on below `count` whose entry is at least `key`
    /// (`orAbove` false) or above it (`orAbove` true); `count` when there is none. Nil when a key
    /// could not be read (`keyAt` returned nil): the reader starts again. What it returns is
    /// right only if the node's version is then found unchanged.
    @inline(__always)
    func loadedSearch(
        _ key: UnsafeRawBufferPointer, from low: Int, count: Int, orAbove: Bool, _ keyAt: (UInt32) -> UnsafeRawBufferPointer?
    ) -> Int? {
        let (order, head) = loadedPrefixOrder(key)
        if order != 0 { return order < 0 ? Swift.min(low, count) : count }
        var low = low, high = count
        while low < high {
            let middle = (low + high) >> 1
            let entryHead = loadedHead(middle)
            var comparison: Int
            if head != entryHead {
                comparison = head < entryHead ? -1 : 1
            } else {
                guard let entry = keyAt(loadedPosition(middle)) else { return nil }
                comparison = OrderedKeys.compare(key, entry)
            }
            // Entries before the answer are below the key (or at most it, `orAbove`).
            if comparison < 0 || (!orAbove && comparison == 0) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CCaskCPU
