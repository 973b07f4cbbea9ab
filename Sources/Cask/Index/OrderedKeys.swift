/// The index's ordered view: a B+tree of the live keys' arena positions in byte order, beside the
/// hash table, so that a range or prefix listing costs O(log n + k) instead of a pass over the table.
///
/// Each entry is 12 bytes: the key's arena position and its *head*. A node keeps the prefix its
/// keys share (up to 32 bytes, inline: its *skip*), and a head is the 8 key bytes after it as a
/// big-endian integer (zero-padded), so that keys sharing long prefixes (`drafts/ada/…`,
/// `0000000000123456`) still differ in their heads. A search compares the probe with a node's
/// prefix once, then decides on heads and reads a key from the arena only when heads tie: an
/// insert costs about one cache miss per level below those the CPU keeps cached, not one per
/// comparison. A node's prefix shrinks (computed from the heads, no arena read) when a key
/// without it arrives, and grows when a split leaves halves with a longer shared prefix. Nodes hold 64 entries; an
/// internal node's entry i is the first key of child i when it was made, which routes a search
/// (keys in child i are at least entry i and below entry i + 1; entry 0 is not read). Deleting a
/// key leaves separators naming it: its bytes stay in the arena until the arena is rebuilt, and the
/// tree is rebuilt with it.
///
/// Memory: 12 bytes per key at the fill of the leaves: under random inserts a full leaf first
/// moves entries to a neighbour with room and splits in halves only when neither has any (about
/// 85% full on average); ascending or descending inserts fill leaves nearly completely (a leaf
/// split at its end keeps its entries); after a rebuild, 60 of 64. A leaf below a quarter full merges with a
/// sibling that then fits in three quarters; an empty node is freed.
///
/// Not thread-safe: it lives in ``KeyIndex``, under the store's index lock. Raw memory, fenced in
/// this file: nodes are manually allocated and freed; `Node` reads and writes their fields.
package struct OrderedKeys: ~Copyable {
    /// Entries per node.
    static let capacity = 64
    /// Entries per leaf after a rebuild: room for a few inserts before a leaf splits.
    static let rebuildFill = 60

    private var root: Node
    /// Live keys held.
    private(set) var count = 0
    private var leafCount = 1
    private var internalCount = 0
    /// The nodes and child indexes of a descent, reused (a path is at most `maximumHeight` long).
    private let path: UnsafeMutablePointer<(node: Node, index: Int)>
    private static let maximumHeight = 32

    init() {
        root = Node.allocate(height: 0)
        path = .allocate(capacity: Self.maximumHeight)
    }

    deinit {
        Self.free(root)
        path.deallocate()
    }

    /// Bytes of memory held by the nodes.
    var memoryBytes: Int { leafCount * Node.byteCount(height: 0) + internalCount * Node.byteCount(height: 1) }

    /// The 8 bytes of `key` from `offset` on as a big-endian integer, zero-padded.
    @inline(__always)
    static func head(_ key: UnsafeRawBufferPointer, from offset: Int) -> UInt64 {
        if key.count >= offset + 8 { return UInt64(bigEndian: key.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        var head: UInt64 = 0
        var index = offset
        while index < key.count {
            head |= UInt64(key[index]) << UInt64(56 - 8 * (index - offset))
            index += 1
        }
        return head
    }

    /// The longest prefix a node keeps inline.
    static let maximumSkip = 32

    // MARK: Updates

    /// Adds `key`, stored at `position` of `arena`; the key must not be in the tree. O(log n).
    mutating func insert(_ key: UnsafeRawBufferPointer, at position: UInt32, arena: borrowing KeyArena) {
        let probe = Probe(key)
        var (node, depth) = descend(probe, arena)
        count += 1
        let at = node.lowerBound(probe, arena, inclusive: true)
        node.admit(key)
        let head = node.head(of: key)
        if node.count < Self.capacity {
            node.insertEntry(at: at, head: head, position: position)
            return
        }
        if depth > 0 && shiftToSibling(node, parent: path[depth - 1].node, index: path[depth - 1].index, inserting: at, key: key, position: position) {
            return
        }
        var split = splitNode(node, inserting: at, head: head, position: position, child: nil, arena: arena)
        while depth > 0 {
            depth -= 1
            let (parent, index) = path[depth]
            if parent.count < Self.capacity {
                parent.insertFirstEntry(of: split, at: index + 1)
                return
            }
            parent.admit(from: split)
            split = splitNode(parent, inserting: index + 1, head: parent.convertedHead(of: split, 0), position: split.position(0),
                              child: split, arena: arena)
        }
        precondition(root.height + 1 < Self.maximumHeight, "ordered index too deep")
        let newRoot = Node.allocate(height: root.height + 1)
        internalCount += 1
        newRoot.copyPrefix(of: root)
        newRoot.insertFirstEntry(of: root, at: 0)
        newRoot.insertFirstEntry(of: split, at: 1)
        root = newRoot
    }

    /// Descends from the root to the leaf where `probe` belongs, recording each internal node and
    /// the child taken in `path`; returns the leaf and the path's length. Each node is loaded whole
    /// as soon as it is chosen (``Node/prefetch()``).
    private func descend(_ probe: Probe, _ arena: borrowing KeyArena) -> (Node, Int) {
        var node = root
        var depth = 0
        while !node.isLeaf {
            let index = node.route(probe, arena)
            path[depth] = (node, index)
            depth += 1
            node = node.child(index)
            node.prefetch()
        }
        return (node, depth)
    }

    /// Removes `key`, which the tree holds at `position`; returns false (changing nothing) when it
    /// does not hold it. O(log n).
    @discardableResult
    mutating func remove(_ key: UnsafeRawBufferPointer, at position: UInt32, arena: borrowing KeyArena) -> Bool {
        let probe = Probe(key)
        var (node, depth) = descend(probe, arena)
        let at = node.lowerBound(probe, arena, inclusive: true)
        guard at < node.count, node.position(at) == position else { return false }
        node.removeEntry(at: at)
        count -= 1
        guard depth > 0 else { return true }
        if node.count == 0 {
            // Free the leaf and every ancestor it leaves empty.
            Self.freeNode(node, counting: &leafCount)
            while depth > 0 {
                depth -= 1
                let (parent, index) = path[depth]
                parent.removeEntry(at: index)
                if parent.count > 0 { break }
                if depth == 0 {
                    // The root lost its last child: the tree is empty.
                    Self.freeNode(parent, counting: &internalCount)
                    root = Node.allocate(height: 0)
                    leafCount += 1
                    return true
                }
                Self.freeNode(parent, counting: &internalCount)
            }
        } else if node.count < Self.capacity / 4 {
            let (parent, index) = path[depth - 1]
            mergeLeaf(at: index, of: parent)
        }
        collapseRoot()
        return true
    }

    /// Empties the tree and fills it with the keys at `positions` of `arena`, which must be in
    /// key order without repeats. O(n), reading each key once more (and a node's first and last
    /// key for its prefix).
    mutating func rebuild(from positions: UnsafeBufferPointer<UInt32>, arena: borrowing KeyArena) {
        Self.free(root)
        leafCount = 0
        internalCount = 0
        count = positions.count
        guard !positions.isEmpty else {
            root = Node.allocate(height: 0)
            leafCount = 1
            return
        }
        // The leaves, evenly filled to at most `rebuildFill`; then each level above them likewise,
        // each node with its first key standing for it in its parent.
        var level: [(node: Node, first: UInt32)] = []
        var start = 0
        for size in Self.evenSizes(positions.count, atMost: Self.rebuildFill) {
            let leaf = Node.allocate(height: 0)
            leaf.fill(with: UnsafeBufferPointer(rebasing: positions[start..<(start + size)]), children: nil, arena: arena)
            level.append((leaf, positions[start]))
            start += size
        }
        leafCount = level.count
        var height = 1
        while level.count > 1 {
            var parents: [(node: Node, first: UInt32)] = []
            var first = 0
            for size in Self.evenSizes(level.count, atMost: Self.rebuildFill) {
                let parent = Node.allocate(height: height)
                let group = level[first..<(first + size)]
                group.map(\.first).withUnsafeBufferPointer { firsts in
                    group.map(\.node).withUnsafeBufferPointer { children in parent.fill(with: firsts, children: children, arena: arena) }
                }
                parents.append((parent, level[first].first))
                first += size
            }
            internalCount += parents.count
            level = parents
            height += 1
        }
        root = level[0].node
    }

    /// Sorts `positions` into the order of their keys in `arena`: a least-significant-digit radix
    /// sort of the 8 key bytes after the prefix all keys share, a byte at a time (skipping the
    /// bytes every key has alike), then a comparison sort of each run of keys equal in those
    /// bytes. O(n) passes plus O(r log r) for runs of r keys.
    static func sort(_ positions: inout [UInt32], arena: borrowing KeyArena) {
        guard positions.count > 1 else { return }
        let first = arena.bytes(at: positions[0])
        var shared = first.count
        for position in positions where shared > 0 { shared = Swift.min(shared, commonPrefixLength(first, arena.bytes(at: position))) }
        var entries = positions.map { (head: head(arena.bytes(at: $0), from: shared), position: $0) }
        var counts = [Int](repeating: 0, count: 8 << 8)
        for entry in entries {
            for byte in 0..<8 { counts[byte << 8 | Int(truncatingIfNeeded: entry.head >> UInt64(byte * 8)) & 0xFF] += 1 }
        }
        let firstHead = entries[0].head
        var scratch = entries
        for byte in 0..<8 {
            let shift = UInt64(byte * 8)
            guard counts[byte << 8 | Int(truncatingIfNeeded: firstHead >> shift) & 0xFF] < entries.count else { continue }
            var next = [Int](repeating: 0, count: 256)
            var position = 0
            for digit in 0..<256 {
                next[digit] = position
                position += counts[byte << 8 | digit]
            }
            for entry in entries {
                let digit = Int(truncatingIfNeeded: entry.head >> shift) & 0xFF
                scratch[next[digit]] = entry
                next[digit] += 1
            }
            swap(&entries, &scratch)
        }
        var start = 0
        while start < entries.count {
            var end = start + 1
            while end < entries.count && entries[end].head == entries[start].head { end += 1 }
            if end - start > 1 {
                entries[start..<end].sort { compare(arena.bytes(at: $0.position), arena.bytes(at: $1.position)) < 0 }
            }
            start = end
        }
        positions = entries.map(\.position)
    }

    /// The number of leading bytes `a` and `b` share.
    static func commonPrefixLength(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let limit = Swift.min(a.count, b.count)
        var index = 0
        while index + 8 <= limit, a.loadUnaligned(fromByteOffset: index, as: UInt64.self) == b.loadUnaligned(fromByteOffset: index, as: UInt64.self) {
            index += 8
        }
        while index < limit && a[index] == b[index] { index += 1 }
        return index
    }

    /// `total` items cut into the fewest groups of at most `limit`, as even as can be.
    private static func evenSizes(_ total: Int, atMost limit: Int) -> [Int] {
        let groups = (total + limit - 1) / limit
        return (0..<groups).map { total / groups + ($0 < total % groups ? 1 : 0) }
    }

    // MARK: Walks

    /// Where a walk starts.
    enum Start {
        /// The first key (ascending) or the last (descending).
        case end
        /// Ascending: the first key at least `key` (`inclusive`) or above it. Descending: the last
        /// key at most `key` (`inclusive`) or below it.
        case key(UnsafeRawBufferPointer, inclusive: Bool)
    }

    /// Calls `body` with the position of each key from `start` on, in ascending or descending key
    /// order, until it returns false or the keys run out. `body` must not change the tree.
    /// O(log n) to start, then O(1) amortized per key.
    func walk(from start: Start, descending: Bool, arena: borrowing KeyArena, _ body: (UInt32) -> Bool) {
        // Walks run side by side under the shared lock: each has its own path, on the stack.
        withUnsafeTemporaryAllocation(of: (node: Node, index: Int).self, capacity: Self.maximumHeight) { path in
            walk(from: start, descending: descending, arena: arena, path: path.baseAddress!, body)
        }
    }

    private func walk(
        from start: Start, descending: Bool, arena: borrowing KeyArena, path: UnsafeMutablePointer<(node: Node, index: Int)>,
        _ body: (UInt32) -> Bool
    ) {
        var cursor = Cursor(path: path)
        // Descend to the leaf where the walk starts, and the index in it (which may be one past
        // either end of the leaf: the first step then moves to the neighbouring leaf).
        var node = root
        guard node.count > 0 else { return }
        switch start {
        case .end:
            while !node.isLeaf {
                let index = descending ? node.count - 1 : 0
                cursor.push(node, index)
                node = node.child(index)
            }
            cursor.leaf = node
            cursor.index = descending ? node.count - 1 : 0
        case .key(let key, let inclusive):
            let probe = Probe(key)
            while !node.isLeaf {
                let index = node.route(probe, arena)
                cursor.push(node, index)
                node = node.child(index)
            }
            cursor.leaf = node
            // Ascending: the first entry at least (or above) the key; descending: the one before
            // the first entry above (or at least) it.
            let bound = node.lowerBound(probe, arena, inclusive: descending ? !inclusive : inclusive)
            cursor.index = descending ? bound - 1 : bound
        }
        while cursor.settle(descending: descending) {
            let leaf = cursor.leaf
            if descending {
                var index = cursor.index
                while index >= 0 {
                    if index >= 8 { cask_prefetch_for_read(arena.address(leaf.position(index - 8))) }
                    guard body(leaf.position(index)) else { return }
                    index -= 1
                }
                cursor.index = -1
            } else {
                var index = cursor.index
                let end = leaf.count
                while index < end {
                    if index + 8 < end { cask_prefetch_for_read(arena.address(leaf.position(index + 8))) }
                    guard body(leaf.position(index)) else { return }
                    index += 1
                }
                cursor.index = end
            }
        }
    }

    /// A position in a walk: the leaf and index, and the internal nodes above it with the child
    /// taken in each (in the tree's reusable path buffer).
    private struct Cursor {
        let path: UnsafeMutablePointer<(node: Node, index: Int)>
        var depth = 0
        var leaf = Node(base: nil)
        var index = 0

        init(path: UnsafeMutablePointer<(node: Node, index: Int)>) { self.path = path }

        mutating func push(_ node: Node, _ index: Int) {
            path[depth] = (node, index)
            depth += 1
        }

        /// Moves past the ends of leaves until `index` is an entry of `leaf`; false when the walk
        /// has run out of keys.
        mutating func settle(descending: Bool) -> Bool {
            while descending ? index < 0 : index >= leaf.count {
                // Up to the nearest ancestor with a child on that side, then down its edge.
                var level = depth - 1
                while level >= 0 {
                    let (node, taken) = path[level]
                    let next = descending ? taken - 1 : taken + 1
                    if next >= 0 && next < node.count {
                        path[level].index = next
                        break
                    }
                    level -= 1
                }
                guard level >= 0 else { return false }
                var node = path[level].node.child(path[level].index)
                depth = level + 1
                while !node.isLeaf {
                    let child = descending ? node.count - 1 : 0
                    push(node, child)
                    node = node.child(child)
                }
                leaf = node
                index = descending ? node.count - 1 : 0
            }
            return true
        }
    }

    // MARK: Checks (tests)

    /// Test-only: traps unless the tree is well formed — entries in strictly ascending key order
    /// across the leaves, every key within its separators, heights even, counts right.
    package func checkInvariants(arena: borrowing KeyArena) {
        var leaves = 0, internals = 0, keys = 0
        var previous: UInt32?
        func check(_ node: Node, lower: (UInt64, UInt32)?, upper: (UInt64, UInt32)?) {
            precondition(node.count > 0 || (node.base == root.base && node.isLeaf), "empty node")
            if node.isLeaf {
                leaves += 1
                for index in 0..<node.count {
                    let position = node.position(index)
                    let key = arena.bytes(at: position)
                    precondition(node.sharesPrefix(key) && node.head(index) == node.head(of: key), "stale head or prefix")
                    if let previous { precondition(Self.compare(arena.bytes(at: previous), key) < 0, "keys out of order") }
                    if let lower { precondition(Self.compare(arena.bytes(at: lower.1), key) <= 0, "key below its separator") }
                    if let upper { precondition(Self.compare(key, arena.bytes(at: upper.1)) < 0, "key above the next separator") }
                    previous = position
                    keys += 1
                }
                return
            }
            internals += 1
            for index in 0..<node.count {
                let separator = arena.bytes(at: node.position(index))
                precondition(node.sharesPrefix(separator) && node.head(index) == node.head(of: separator), "stale separator head or prefix")
                let child = node.child(index)
                precondition(child.height == node.height - 1, "uneven heights")
                let childLower = index == 0 ? lower : (node.head(index), node.position(index))
                let childUpper = index + 1 < node.count ? (node.head(index + 1), node.position(index + 1)) : upper
                check(child, lower: childLower, upper: childUpper)
            }
        }
        check(root, lower: nil, upper: nil)
        precondition(keys == count && leaves == leafCount && internals == internalCount, "counts differ")
    }

    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = Swift.min(a.count, b.count)
        if common > 0 {
            let order = memcmp(a.baseAddress!, b.baseAddress!, common)
            if order != 0 { return Int(order) }
        }
        return a.count - b.count
    }

    // MARK: Splitting, merging, freeing

    /// Splits the full `node` while inserting an entry (whose head is in `node`'s terms; in an
    /// internal node, with its child) at `at`; returns the new right-hand node. Inserting at the
    /// end keeps the left node full (ascending keys fill leaves completely); at the start, the left
    /// node gets the new entry alone (descending keys likewise); anywhere else, halves. Both halves
    /// start with `node`'s prefix, then take a longer one where their keys share it.
    private mutating func splitNode(
        _ node: Node, inserting at: Int, head: UInt64, position: UInt32, child: Node?, arena: borrowing KeyArena
    ) -> Node {
        let total = node.count + 1
        let stay = at == node.count ? node.count : at == 0 ? 1 : total / 2
        let right = Node.allocate(height: node.height)
        right.copyPrefix(of: node)
        if node.isLeaf { leafCount += 1 } else { internalCount += 1 }
        // The combined sequence is node's entries with the new one at `at`.
        for combined in stay..<total {
            let target = combined - stay
            if combined == at {
                right.insertEntry(at: target, head: head, position: position, child: child)
            } else {
                let source = combined < at ? combined : combined - 1
                right.insertEntry(at: target, head: node.head(source), position: node.position(source),
                                  child: node.isLeaf ? nil : node.child(source))
            }
        }
        // The left keeps combined[0..<stay]: its entries below `at`, the new one if `at < stay`,
        // then its entries from `at` on up to `stay`.
        let keptOld = at < stay ? stay - 1 : stay
        node.truncate(to: keptOld)
        if at < stay { node.insertEntry(at: at, head: head, position: position, child: child) }
        node.growPrefix(arena)
        right.growPrefix(arena)
        return right
    }

    /// Makes room in the full leaf `node` (child `index` of `parent`) by moving entries to a
    /// neighbour with room, then inserts `key` (which `node` has admitted) at `at`; false (changing
    /// nothing) when neither neighbour has room for a few. Spreading entries before splitting
    /// raises the leaves' fill under random inserts: fewer bytes per key.
    private func shiftToSibling(_ node: Node, parent: Node, index: Int, inserting at: Int, key: UnsafeRawBufferPointer, position: UInt32) -> Bool {
        let capacity = Self.capacity
        if index + 1 < parent.count, case let right = parent.child(index + 1), right.count <= capacity - 4 {
            // The last `moved` entries go to the front of the right neighbour.
            let moved = (capacity - right.count) / 2
            right.admit(from: node)
            for offset in 0..<moved {
                let source = capacity - moved + offset
                right.insertEntry(at: offset, head: right.convertedHead(of: node, source), position: node.position(source))
            }
            node.truncate(to: capacity - moved)
            if at <= capacity - moved {
                node.insertEntry(at: at, head: node.head(of: key), position: position)
            } else {
                right.admit(key)
                right.insertEntry(at: at - (capacity - moved), head: right.head(of: key), position: position)
            }
            parent.admit(from: right)
            parent.setEntry(index + 1, head: parent.convertedHead(of: right, 0), position: right.position(0))
            return true
        }
        if index > 0, case let left = parent.child(index - 1), left.count <= capacity - 4 {
            // The first `moved` entries go to the end of the left neighbour.
            let moved = (capacity - left.count) / 2
            left.admit(from: node)
            let leftCount = left.count
            for offset in 0..<moved {
                left.insertEntry(at: leftCount + offset, head: left.convertedHead(of: node, offset), position: node.position(offset))
            }
            node.removeFirst(moved)
            if at < moved {
                left.admit(key)
                left.insertEntry(at: leftCount + at, head: left.head(of: key), position: position)
            } else {
                node.insertEntry(at: at - moved, head: node.head(of: key), position: position)
            }
            parent.admit(from: node)
            parent.setEntry(index, head: parent.convertedHead(of: node, 0), position: node.position(0))
            return true
        }
        return false
    }

    /// Merges the leaf at `index` of `parent` with a neighbour when together they fit in three
    /// quarters of a node.
    private mutating func mergeLeaf(at index: Int, of parent: Node) {
        let leftIndex: Int
        if index + 1 < parent.count, parent.child(index).count + parent.child(index + 1).count <= Self.capacity * 3 / 4 {
            leftIndex = index
        } else if index > 0, parent.child(index - 1).count + parent.child(index).count <= Self.capacity * 3 / 4 {
            leftIndex = index - 1
        } else {
            return
        }
        let left = parent.child(leftIndex), right = parent.child(leftIndex + 1)
        left.admit(from: right)
        for offset in 0..<right.count {
            left.insertEntry(at: left.count, head: left.convertedHead(of: right, offset), position: right.position(offset))
        }
        parent.removeEntry(at: leftIndex + 1)
        Self.freeNode(right, counting: &leafCount)
    }

    /// Replaces a root with one child by the child, as often as it applies.
    private mutating func collapseRoot() {
        while !root.isLeaf && root.count == 1 {
            let old = root
            root = old.child(0)
            Self.freeNode(old, counting: &internalCount)
        }
    }

    private static func freeNode(_ node: Node, counting nodes: inout Int) {
        node.base!.deallocate()
        nodes -= 1
    }

    /// Frees `node` and everything below it.
    private static func free(_ node: Node) {
        if !node.isLeaf { for index in 0..<node.count { free(node.child(index)) } }
        node.base!.deallocate()
    }
}

/// A search key.
private struct Probe {
    let key: UnsafeRawBufferPointer

    @inline(__always)
    init(_ key: UnsafeRawBufferPointer) { self.key = key }
}

/// A node of the tree in raw memory: a 2-byte count, a 2-byte height (0 for a leaf) and the
/// 2-byte length of the prefix its entries share (`skip`, at most 32), the prefix's bytes, then
/// `capacity` heads (8 bytes each: the key bytes after the prefix), `capacity` positions (4 bytes)
/// and, in an internal node, `capacity` child pointers. Every accessor stays inside the node for
/// indexes below `capacity`, which the tree's code guarantees (counts never exceed it).
private struct Node {
    let base: UnsafeMutableRawPointer?

    private static let capacity = OrderedKeys.capacity
    private static let prefixOffset = 8
    private static let headsOffset = prefixOffset + OrderedKeys.maximumSkip
    private static let positionsOffset = headsOffset + 8 * capacity
    private static let childrenOffset = positionsOffset + 4 * capacity

    static func byteCount(height: Int) -> Int { height == 0 ? childrenOffset : childrenOffset + 8 * capacity }

    static func allocate(height: Int) -> Node {
        let base = UnsafeMutableRawPointer.allocate(byteCount: byteCount(height: height), alignment: 64)
        (base + prefixOffset).bindMemory(to: UInt8.self, capacity: OrderedKeys.maximumSkip)
        (base + headsOffset).bindMemory(to: UInt64.self, capacity: capacity)
        (base + positionsOffset).bindMemory(to: UInt32.self, capacity: capacity)
        if height > 0 { (base + childrenOffset).bindMemory(to: UnsafeMutableRawPointer?.self, capacity: capacity) }
        base.storeBytes(of: 0, as: UInt16.self)
        base.storeBytes(of: UInt16(height), toByteOffset: 2, as: UInt16.self)
        base.storeBytes(of: 0, toByteOffset: 4, as: UInt16.self)
        return Node(base: base)
    }

    @inline(__always) var count: Int { Int(base!.load(as: UInt16.self)) }
    @inline(__always) var height: Int { Int(base!.load(fromByteOffset: 2, as: UInt16.self)) }
    @inline(__always) var isLeaf: Bool { base!.load(fromByteOffset: 2, as: UInt16.self) == 0 }
    /// The length of the prefix every entry's key starts with.
    @inline(__always) var skip: Int { Int(base!.load(fromByteOffset: 4, as: UInt16.self)) }

    @inline(__always) private func setCount(_ count: Int) { base!.storeBytes(of: UInt16(count), as: UInt16.self) }
    @inline(__always) private func setSkip(_ skip: Int) { base!.storeBytes(of: UInt16(skip), toByteOffset: 4, as: UInt16.self) }

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
        for index in 0..<count { heads[index] = Self.head(prefix: prefix, from: shorter, to: skip, then: heads[index]) }
        setSkip(shorter)
    }

    /// Takes `other`'s prefix (for a node that will hold some of `other`'s entries, heads as they are).
    func copyPrefix(of other: Node) {
        prefix.update(from: other.prefix, count: OrderedKeys.maximumSkip)
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
        UnsafeMutableRawBufferPointer(start: prefix, count: shared).copyMemory(from: UnsafeRawBufferPointer(rebasing: first[..<shared]))
        setSkip(shared)
        for index in 0..<count { heads[index] = OrderedKeys.head(arena.bytes(at: positions[index]), from: shared) }
    }

    /// Fills an empty node with the keys at `positions` (sorted) and, in an internal node, their
    /// `children`: the prefix their first and last keys share, each head read from the arena.
    func fill(with positions: UnsafeBufferPointer<UInt32>, children: UnsafeBufferPointer<Node>?, arena: borrowing KeyArena) {
        let first = arena.bytes(at: positions[0]), last = arena.bytes(at: positions[positions.count - 1])
        let shared = Swift.min(OrderedKeys.maximumSkip, OrderedKeys.commonPrefixLength(first, last))
        UnsafeMutableRawBufferPointer(start: prefix, count: shared).copyMemory(from: UnsafeRawBufferPointer(rebasing: first[..<shared]))
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
        let moved = count - index
        (heads + index + 1).update(from: heads + index, count: moved)
        (positions + index + 1).update(from: positions + index, count: moved)
        heads[index] = head
        positions[index] = position
        if !isLeaf {
            (children + index + 1).update(from: children + index, count: moved)
            children[index] = child!.base
        }
        setCount(count + 1)
    }

    func removeEntry(at index: Int) {
        let count = self.count
        let moved = count - index - 1
        heads.advanced(by: index).update(from: heads + index + 1, count: moved)
        positions.advanced(by: index).update(from: positions + index + 1, count: moved)
        if !isLeaf { children.advanced(by: index).update(from: children + index + 1, count: moved) }
        setCount(count - 1)
    }

    func truncate(to count: Int) { setCount(count) }

    /// Drops the first `dropped` entries of a leaf.
    func removeFirst(_ dropped: Int) {
        let count = self.count
        heads.update(from: heads + dropped, count: count - dropped)
        positions.update(from: positions + dropped, count: count - dropped)
        setCount(count - dropped)
    }

    func setEntry(_ index: Int, head: UInt64, position: UInt32) {
        heads[index] = head
        positions[index] = position
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

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CCaskCPU
