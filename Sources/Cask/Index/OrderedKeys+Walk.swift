// The ordered index's walks: its keys in ascending or descending order, from an end or a key.

extension OrderedKeys {
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
}

import CCaskCPU
