/// The index's key bytes: each key once, prefixed by its length as a varint, in 256 KiB chunks,
/// named by a 32-bit position (chunk << 18 | offset) that the hash table and the ordered view hold.
///
/// A position stays valid until ``KeyIndex`` rebuilds the arena (when deleted keys waste more than
/// half of it); a deleted key's bytes stay readable until then, which the ordered view's separators
/// rely on. Chunk 0 starts small and grows by copying to full size, so that a store with a handful
/// of keys does not pay for a full chunk; positions do not change when it grows.
///
/// Thread-safety: the store's index lock guards it with the rest of the index, but for readers
/// without the lock (``keyWithoutLock(at:table:)``): they find the chunks in a table of their own
/// (``readerTable``: the chunk count, chunk 0's capacity, then the chunks' addresses, all stored
/// atomically) and read only keys whose positions the ordered view published after their bytes
/// were written; memory such a reader may still use (chunk 0 before it grew, a table before it
/// grew) is retired rather than freed, until the index has waited for the readers
/// (``freeRetired()``).
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
    /// The chunk table for readers without the lock: [count, chunk 0's capacity, table capacity,
    /// chunk addresses…], 8 bytes each. Replaced (and the old one retired) when it fills.
    private(set) var readerTable: UnsafeMutableRawPointer
    private static let tableHeaderWords = 3
    /// Memory retired until the readers have left: freed by ``freeRetired()``.
    private(set) var retired: [UnsafeMutableRawPointer] = []

    init() {
        readerTable = Self.allocateTable(capacity: 4)
    }

    deinit {
        chunks.forEach { $0.deallocate() }
        retired.forEach { $0.deallocate() }
        readerTable.deallocate()
    }

    private static func allocateTable(capacity: Int) -> UnsafeMutableRawPointer {
        let words = tableHeaderWords + capacity
        let table = UnsafeMutableRawPointer.allocate(byteCount: 8 * words, alignment: 8)
        table.initializeMemory(as: UInt64.self, repeating: 0, count: words)
        table.storeBytes(of: UInt64(capacity), toByteOffset: 16, as: UInt64.self)
        return table
    }

    /// Frees the retired memory. Only after ``ReaderRegistry/waitForReaders()``.
    mutating func freeRetired() {
        for memory in retired { memory.deallocate() }
        retired.removeAll()
    }

    /// Stores chunk `index`'s address in the reader table, and then (release) the count and chunk
    /// 0's capacity, which a reader loads first: a reader that sees a chunk counted, or chunk 0 this
    /// large, sees its address too.
    private mutating func publishChunk(_ index: Int) {
        let capacity = Int(readerTable.load(fromByteOffset: 16, as: UInt64.self))
        if index >= capacity {
            let grown = Self.allocateTable(capacity: capacity * 2)
            for word in 0..<(Self.tableHeaderWords + capacity) {
                grown.storeBytes(of: readerTable.load(fromByteOffset: 8 * word, as: UInt64.self), toByteOffset: 8 * word, as: UInt64.self)
            }
            grown.storeBytes(of: UInt64(capacity * 2), toByteOffset: 16, as: UInt64.self)
            retired.append(readerTable)
            readerTable = grown  // the index publishes it (``KeyIndex/publishArena()``)
        }
        cask_store_pointer_release(
            (readerTable + 8 * (Self.tableHeaderWords + index)).assumingMemoryBound(to: UnsafeMutableRawPointer?.self), chunks[index])
        cask_store_word_release(readerTable + 8, UInt64(chunk0Capacity))
        cask_store_word_release(readerTable, UInt64(chunks.count))
    }

    /// For a reader without the lock: starts loading the key at `position` (its first line), as
    /// the reader table `table` shows the arena. Reads only the table; a prefetch never faults.
    @inline(__always)
    static func prefetchWithoutLock(_ position: UInt32, table: UnsafeRawPointer) {
        let chunk = Int(position >> chunkShift)
        guard chunk < Int(cask_load_word_acquire(table)),
              let start = cask_load_pointer_acquire((table + 8 * (tableHeaderWords + chunk)).assumingMemoryBound(to: UnsafeMutableRawPointer?.self))
        else { return }
        cask_prefetch_for_read(start + Int(position & offsetMask))
    }

    /// For a reader without the lock: the key at `position` as the reader table `table` shows the
    /// arena, or nil when the position lies outside its chunks (its bytes are then not to be read:
    /// the reader raced a change). The bytes are those `store` wrote when the caller loaded the
    /// position from the ordered view (acquire), and valid while the reader is inside
    /// ``ReaderRegistry/read(_:)``.
    @inline(__always)
    static func keyWithoutLock(at position: UInt32, table: UnsafeRawPointer) -> UnsafeRawBufferPointer? {
        let chunk = Int(position >> chunkShift), offset = Int(position & offsetMask)
        let count = Int(cask_load_word_acquire(table))
        guard chunk < count else { return nil }
        let capacity = chunk == 0 ? Int(cask_load_word_acquire(table + 8)) : chunkSize
        guard let start = cask_load_pointer_acquire((table + 8 * (tableHeaderWords + chunk)).assumingMemoryBound(to: UnsafeMutableRawPointer?.self))
        else { return nil }
        // Safe: offset < chunkSize and capacity <= chunkSize, so no difference below overflows.
        let room = capacity &- offset
        guard room > 0 else { return nil }
        let header = UnsafeRawBufferPointer(start: start + offset, count: Swift.min(3, room))
        var read = 0
        guard let length = Varint.read(header, at: &read), Int(length) <= room &- read else { return nil }
        return UnsafeRawBufferPointer(start: start + offset + read, count: Int(length))
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
            retired.append(chunks[0])  // a reader may be reading a key in it
            chunks[0] = grown
            chunk0Capacity = grownCapacity
            publishChunk(0)
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
            publishChunk(chunks.count - 1)
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

import CCaskCPU
