// The ordered index read without the lock: one leaf at a time, optimistically, beside the writer.

extension OrderedKeys {
    /// What ``readLeaf(root:from:descending:into:_:)`` read.
    struct LeafRead {
        /// Positions copied, in walk order.
        var count: Int
        /// The key at which the keys after the leaf's (in walk order) begin: the walk goes on from
        /// it (ascending: keys at least it; descending: keys below it). Nil: the leaf is the last.
        var fence: UInt32?
    }

    /// For a reader without the lock, inside ``ReaderRegistry/read(_:)``: descends from the root
    /// that `root` holds to the leaf where a walk from `start` begins (as
    /// ``walk(from:descending:arena:_:)`` does) and copies to `positions` (room for ``capacity``)
    /// the leaf's positions from there on, in walk order. Nil when the writer changed a node on
    /// the way (or `keyAt` could not read a key): nothing read is to be used, and the caller
    /// starts again.
    ///
    /// What it returns held at one instant: each node's version is loaded before its fields and
    /// checked unchanged after them, and a parent's again after its child's version was loaded
    /// (so the child was its child, covering the keys its separators say, when the child's reads
    /// began). The leaf copied is then every key of its range at the instant its version was
    /// checked: a key in it leaves the range only by a change to the leaf (a removal, a split, a
    /// move to a neighbour or a merge), which changes its version. The positions copied name keys
    /// whose bytes stay in the arena until the index rebuilds it, which the caller rules out
    /// separately. `keyAt` reads a key for a comparison, nil when it cannot (the position is out
    /// of the arena's bounds: the reader raced a change). O(log n).
    static func readLeaf(
        root: UnsafeMutablePointer<UnsafeMutableRawPointer?>, from start: Start, descending: Bool,
        into positions: UnsafeMutablePointer<UInt32>, _ keyAt: (UInt32) -> UnsafeRawBufferPointer?
    ) -> LeafRead? {
        var node = Node(base: cask_load_pointer_acquire(root))
        guard node.base != nil else { return nil }
        node.prefetch()
        var version = node.loadedVersion
        // Still the root once its version is known: a root that splits stays odd until the new root is published.
        guard version & 1 == 0, cask_load_pointer_acquire(root) == node.base else { return nil }
        var fence: UInt32?
        while !node.loadedIsLeaf {
            let count = node.loadedCount
            guard count > 0 else { return nil }
            let index: Int
            switch start {
            case .end:
                index = descending ? count - 1 : 0
            case .key(let key, let inclusive):
                // The child of the keys at or below `key` (the number of entries from 1 on that are at
                // most it, less one); for a descending walk from below `key`, of the keys below it.
                let orAbove = !descending || inclusive
                guard let first = node.loadedSearch(key, from: 1, count: count, orAbove: orAbove, keyAt) else { return nil }
                index = first - 1
            }
            // The nearest separator on the walk's side bounds the leaf's keys: the deepest one wins.
            if descending {
                if index > 0 { fence = node.loadedPosition(index) }
            } else if index + 1 < count {
                fence = node.loadedPosition(index + 1)
            }
            let child = node.loadedChild(index)
            guard child.base != nil, node.isUnchanged(since: version) else { return nil }
            // Its header, heads and positions load at once, not miss by miss down the search.
            child.prefetch()
            let childVersion = child.loadedVersion
            guard childVersion & 1 == 0, node.isUnchanged(since: version) else { return nil }
            node = child
            version = childVersion
        }
        let count = node.loadedCount
        var first: Int
        switch start {
        case .end:
            first = descending ? count - 1 : 0
        case .key(let key, let inclusive):
            // Ascending: the first entry at least (or above) the key; descending: the one before
            // the first entry above (or at least) it.
            guard let bound = node.loadedSearch(key, from: 0, count: count, orAbove: descending ? inclusive : !inclusive, keyAt) else {
                return nil
            }
            first = descending ? bound - 1 : bound
        }
        var copied = 0
        if descending {
            while first >= 0 {
                positions[copied] = node.loadedPosition(first)
                copied += 1
                first -= 1
            }
        } else {
            while first < count {
                positions[copied] = node.loadedPosition(first)
                copied += 1
                first += 1
            }
        }
        guard node.isUnchanged(since: version) else { return nil }
        return LeafRead(count: copied, fence: fence)
    }
}

import CCaskCPU
