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
/// Thread-safety: it lives in ``KeyIndex``; its updates and ``walk(from:descending:arena:_:)`` run
/// under the store's index lock. Readers without the lock (``readLeaf(root:from:descending:into:_:)``)
/// run beside the updates, optimistically: each node has a version that an update makes odd while
/// it changes the node (every node it changes stays odd until the update ends, so a reader never
/// sees half of a split or a move between neighbours), and a reader that finds a version changed
/// starts again from the root. Nodes an update takes out are not freed at once but retired, marked
/// so that a reader's validation fails, and freed by ``freeRetired()``, which the index calls only
/// after ``ReaderRegistry/waitForReaders()``. Raw memory, fenced in the `OrderedKeys` files: nodes
/// are manually allocated and freed; `Node` reads and writes their fields.
package struct OrderedKeys: ~Copyable {
    /// Entries per node.
    static let capacity = 64
    /// Entries per leaf after a rebuild: room for a few inserts before a leaf splits.
    static let rebuildFill = 60

    private(set) var root: Node {
        didSet { cask_store_pointer_release(rootCell, root.base) }
    }
    /// Where readers without the lock find the root: stored (release) whenever the root changes,
    /// before the old root's version is even again or retired.
    let rootCell: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// The nodes the update under way has locked (made odd), made even when it ends.
    private let locked: UnsafeMutablePointer<Node>
    private var lockedCount = 0
    private static let lockedCapacity = 4 * maximumHeight + 8
    /// Nodes taken out of the tree, freed by ``freeRetired()``.
    private(set) var retired: [UnsafeMutableRawPointer] = []
    /// Live keys held.
    private(set) var count = 0
    private var leafCount = 1
    private var internalCount = 0
    /// The nodes and child indexes of a descent, reused (a path is at most `maximumHeight` long).
    private let path: UnsafeMutablePointer<(node: Node, index: Int)>
    static let maximumHeight = 32

    /// An empty tree whose root readers find in `rootCell` (which must outlive it).
    init(rootCell: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        self.rootCell = rootCell
        root = Node.allocate(height: 0)
        path = .allocate(capacity: Self.maximumHeight)
        locked = .allocate(capacity: Self.lockedCapacity)
        cask_store_pointer_release(rootCell, root.base)
    }

    deinit {
        Self.free(root)
        retired.forEach { $0.deallocate() }
        path.deallocate()
        locked.deallocate()
    }

    /// Frees the retired nodes. Only once no reader without the lock can hold one: after
    /// ``ReaderRegistry/waitForReaders()`` (or with no such reader at all).
    mutating func freeRetired() {
        for base in retired { base.deallocate() }
        retired.removeAll()
    }

    // MARK: Versions

    /// Makes `node`'s version odd for the rest of the update, if this update has not already.
    @inline(__always)
    private mutating func lock(_ node: Node) {
        guard !node.isVersionLocked else { return }
        precondition(lockedCount < Self.lockedCapacity, "too many nodes in one update")
        node.lockVersion()
        locked[lockedCount] = node
        lockedCount += 1
    }

    /// Ends an update: every node it changed gets an even version again (retired ones keep theirs).
    @inline(__always)
    private mutating func unlockAll() {
        for index in 0..<lockedCount where !locked[index].isRetired { locked[index].unlockVersion() }
        lockedCount = 0
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
        lock(node)
        defer { unlockAll() }
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
            lock(parent)
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
        lock(node)
        defer { unlockAll() }
        node.removeEntry(at: at)
        count -= 1
        guard depth > 0 else { return true }
        if node.count == 0 {
            // Free the leaf and every ancestor it leaves empty.
            retire(node)
            while depth > 0 {
                depth -= 1
                let (parent, index) = path[depth]
                lock(parent)
                parent.removeEntry(at: index)
                if parent.count > 0 { break }
                if depth == 0 {
                    // The root lost its last child: the tree is empty.
                    root = Node.allocate(height: 0)
                    leafCount += 1
                    retire(parent)
                    return true
                }
                retire(parent)
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
    /// The old nodes are retired (readers beside the rebuild see them so and start again), not freed.
    mutating func rebuild(from positions: UnsafeBufferPointer<UInt32>, arena: borrowing KeyArena) {
        let old = root
        defer { retireAll(old) }
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

    /// `total` items cut into the fewest groups of at most `limit`, as even as can be.
    private static func evenSizes(_ total: Int, atMost limit: Int) -> [Int] {
        let groups = (total + limit - 1) / limit
        return (0..<groups).map { total / groups + ($0 < total % groups ? 1 : 0) }
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
    private mutating func shiftToSibling(_ node: Node, parent: Node, index: Int, inserting at: Int, key: UnsafeRawBufferPointer, position: UInt32) -> Bool {
        let capacity = Self.capacity
        if index + 1 < parent.count, case let right = parent.child(index + 1), right.count <= capacity - 4 {
            lock(right)
            lock(parent)
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
            lock(left)
            lock(parent)
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
        lock(left)
        lock(right)
        lock(parent)
        left.admit(from: right)
        for offset in 0..<right.count {
            left.insertEntry(at: left.count, head: left.convertedHead(of: right, offset), position: right.position(offset))
        }
        parent.removeEntry(at: leftIndex + 1)
        retire(right)
    }

    /// Replaces a root with one child by the child, as often as it applies.
    private mutating func collapseRoot() {
        while !root.isLeaf && root.count == 1 {
            let old = root
            root = old.child(0)
            retire(old)
        }
    }

    /// Takes `node`, out of the tree now, off the counts and marks it retired, to be freed by
    /// ``freeRetired()``.
    private mutating func retire(_ node: Node) {
        if node.isLeaf { leafCount -= 1 } else { internalCount -= 1 }
        node.retireVersion()
        retired.append(node.base!)
    }

    /// Retires `node` and everything below it.
    private mutating func retireAll(_ node: Node) {
        if !node.isLeaf { for index in 0..<node.count { retireAll(node.child(index)) } }
        node.retireVersion()
        retired.append(node.base!)
    }

    /// Frees `node` and everything below it.
    private static func free(_ node: Node) {
        if !node.isLeaf { for index in 0..<node.count { free(node.child(index)) } }
        node.base!.deallocate()
    }
}

import CCaskCPU
