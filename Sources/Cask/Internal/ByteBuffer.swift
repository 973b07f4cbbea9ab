/// A growable, reusable byte buffer over raw memory: the writer's record buffer and the scanner's
/// read window. Appending never allocates once the capacity suffices.
///
/// Not thread-safe; owned by one writer or one scan. Pointers handed to closures must not escape them.
package struct ByteBuffer: ~Copyable {
    private var storage: UnsafeMutableRawPointer
    package private(set) var capacity: Int
    /// The number of bytes written so far.
    package var count: Int = 0

    package init(capacity: Int) {
        self.capacity = max(capacity, 64)
        storage = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Ensures room for `additional` more bytes past `count`, keeping the contents.
    package mutating func reserve(_ additional: Int) {
        let needed = count + additional
        guard needed > capacity else { return }
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage, byteCount: count)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    /// Shrinks a buffer that grew past `limit` back to `limit` bytes of capacity, dropping contents.
    package mutating func reset(shrinkingTo limit: Int) {
        count = 0
        guard capacity > limit else { return }
        storage.deallocate()
        capacity = limit
        storage = UnsafeMutableRawPointer.allocate(byteCount: limit, alignment: 16)
    }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        if let base = bytes.baseAddress { (storage + count).copyMemory(from: base, byteCount: bytes.count) }
        count += bytes.count
    }

    package mutating func append(byte: UInt8) {
        reserve(1)
        storage.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    package mutating func append<T: FixedWidthInteger>(littleEndian value: T) {
        reserve(MemoryLayout<T>.size)
        storage.storeBytes(of: value.littleEndian, toByteOffset: count, as: T.self)
        count += MemoryLayout<T>.size
    }

    /// Appends `value` as an unsigned LEB128 varint (1 to 10 bytes).
    package mutating func append(varint value: UInt64) {
        reserve(10)
        count += Varint.write(value, to: storage + count)
    }

    /// Overwrites a little-endian integer at `offset` (already within `count`).
    package mutating func set<T: FixedWidthInteger>(littleEndian value: T, at offset: Int) {
        precondition(offset >= 0 && offset + MemoryLayout<T>.size <= count)
        storage.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
    }

    /// Gives write access to `length` reserved bytes past `count`; `body` returns how many it used.
    package mutating func appendWithUnsafeSpace(_ length: Int, _ body: (UnsafeMutableRawBufferPointer) -> Int) {
        reserve(length)
        let used = body(UnsafeMutableRawBufferPointer(start: storage + count, count: length))
        precondition(used >= 0 && used <= length)
        count += used
    }

    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage, count: count))
    }

    /// Read-write access to the whole capacity (used to pread into the buffer).
    package mutating func withUnsafeMutableCapacity<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: storage, count: capacity))
    }

    /// Removes the first `n` bytes, moving the rest to the front.
    package mutating func removeFirst(_ n: Int) {
        precondition(n >= 0 && n <= count)
        if n < count { storage.copyMemory(from: storage + n, byteCount: count - n) }
        count -= n
    }

    package func copyBytes() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }
}

/// Unsigned LEB128 varints: 7 bits per byte, least significant group first, high bit = more follows.
package enum Varint {
    /// Writes `value` at `pointer` (which must have 10 bytes of room); returns the byte count.
    @inline(__always)
    package static func write(_ value: UInt64, to pointer: UnsafeMutableRawPointer) -> Int {
        var value = value
        var index = 0
        while value >= 0x80 {
            pointer.storeBytes(of: UInt8(truncatingIfNeeded: value) | 0x80, toByteOffset: index, as: UInt8.self)
            value >>= 7
            index &+= 1  // Safe: at most 10 iterations for a UInt64.
        }
        pointer.storeBytes(of: UInt8(value), toByteOffset: index, as: UInt8.self)
        return index + 1
    }

    package static func size(of value: UInt64) -> Int {
        var value = value
        var size = 1
        while value >= 0x80 { value >>= 7; size += 1 }
        return size
    }

    /// Reads a varint from `bytes` at `offset`.
    /// Returns `nil` when it runs past the end, is longer than 10 bytes, overflows 64 bits, or is
    /// not in its shortest form (a final `0x00` after other bytes): every varint has one encoding.
    @inline(__always)
    package static func read(_ bytes: UnsafeRawBufferPointer, at offset: inout Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var index = offset
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 {
                if byte == 0 && shift > 0 { return nil }  // not minimal
                offset = index
                return result
            }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }
}

extension UnsafeRawBufferPointer {
    /// A little-endian integer at `offset`; the caller has checked the bounds.
    @inline(__always)
    package func readLittleEndian<T: FixedWidthInteger>(at offset: Int, as: T.Type) -> T {
        precondition(offset >= 0 && offset + MemoryLayout<T>.size <= count)
        return T(littleEndian: baseAddress!.loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
