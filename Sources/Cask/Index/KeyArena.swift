/// The index's key bytes: each key once, prefixed by its length as a varint, in 256 KiB chunks,
/// named by a 32-bit position (chunk << 18 | offset) that the hash table and the ordered view hold.
///
/// A position stays valid until ``KeyIndex`` rebuilds the arena (when deleted keys waste more than
/// half of it); a deleted key's bytes stay readable until then, which the ordered view's separators
/// rely on. Chunk 0 starts small and grows by copying to full size, so that a store with a handful
/// of keys does not pay for a full chunk; positions do not change when it grows.
///
/// Not thread-safe: the store's index lock guards it with the rest of the index.
package struct KeyArena: ~Copyable {
    /// The chunk size bounds the slack (the unused end of the last chunk) to about a byte per key
    /// from 200,000 keys on; a key is at most 64 KiB.
    static let chunkShift = 18
    static let chunkSize = 1 << chunkShift
    static let offsetMask = UInt32(chunkSize - 1)

    private var chunks: [UnsafeMutableRawPointer] = []
    /// Bytes used in the last chunk.
    private var used = 0
    private var chunk0Capacity = 0
    /// Bytes of deleted keys (with their length prefixes), and of live ones.
    private(set) var garbage = 0
    private(set) var live = 0

    init() {}

    deinit {
        chunks.forEach { $0.deallocate() }
    }

    /// Bytes of memory held.
    var memoryBytes: Int {
        chunks.count <= 1 ? chunk0Capacity : chunks.count * Self.chunkSize
    }

    /// Whether deleted keys waste more than half of the arena (and more than a chunk).
    var isWasteful: Bool { garbage > Self.chunkSize && garbage > live }

    /// Where a position's length prefix starts.
    @inline(__always)
    func address(_ position: UInt32) -> UnsafeMutableRawPointer {
        chunks[Int(position >> Self.chunkShift)] + Int(position & Self.offsetMask)
    }

    /// The key at `position`: valid until the arena is next changed.
    @inline(__always)
    func bytes(at position: UInt32) -> UnsafeRawBufferPointer {
        let start = address(position)
        // The length varint was written whole by `store`, so reading it stays inside the chunk.
        let header = UnsafeRawBufferPointer(start: start, count: 3)
        var offset = 0
        let length = Int(Varint.read(header, at: &offset)!)
        return UnsafeRawBufferPointer(start: start + offset, count: length)
    }

    /// Copies `key` in; returns its position. Traps beyond 4 GiB of keys.
    mutating func store(_ key: UnsafeRawBufferPointer) -> UInt32 {
        let needed = Varint.size(of: UInt64(key.count)) + key.count
        if chunks.count == 1, chunk0Capacity < Self.chunkSize, used + needed > chunk0Capacity {
            var grownCapacity = chunk0Capacity * 2
            while grownCapacity < used + needed && grownCapacity < Self.chunkSize { grownCapacity *= 2 }
            grownCapacity = min(grownCapacity, Self.chunkSize)  // a second chunk comes only after this one is full size
            let grown = UnsafeMutableRawPointer.allocate(byteCount: grownCapacity, alignment: 8)
            grown.copyMemory(from: chunks[0], byteCount: used)
            chunks[0].deallocate()
            chunks[0] = grown
            chunk0Capacity = grownCapacity
        }
        let lastCapacity = chunks.count == 1 ? chunk0Capacity : Self.chunkSize
        if chunks.isEmpty || used + needed > lastCapacity {
            precondition(chunks.count < 1 << (32 - Self.chunkShift), "the index holds at most 4 GiB of keys")
            if chunks.isEmpty {
                var initial = 4096
                while initial < needed { initial *= 2 }
                chunk0Capacity = min(initial, Self.chunkSize)
                chunks.append(.allocate(byteCount: chunk0Capacity, alignment: 8))
            } else {
                chunks.append(.allocate(byteCount: Self.chunkSize, alignment: 8))
            }
            used = 0
        }
        let chunk = chunks[chunks.count - 1]
        let position = UInt32(chunks.count - 1) << Self.chunkShift | UInt32(used)
        var written = Varint.write(UInt64(key.count), to: chunk + used)
        if let base = key.baseAddress { (chunk + used + written).copyMemory(from: base, byteCount: key.count) }
        written += key.count
        used += written
        live += written
        return position
    }

    /// Counts the key at `position` as deleted; its bytes stay readable until the arena is rebuilt.
    mutating func release(_ position: UInt32) {
        let length = bytes(at: position).count
        let size = length + Varint.size(of: UInt64(length))
        garbage += size
        live -= size
    }
}
