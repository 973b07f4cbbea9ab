/// The growable byte buffer the binary encoder writes into, reused from one value to the next.
///
/// One of the few files of the library that touch raw memory: everything here keeps
/// `0 <= count <= capacity`, and every store is preceded by a `reserve` covering it.
/// Not thread-safe; owned by one encoder.
struct ObjectWriter: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    /// The number of bytes written.
    private(set) var count = 0

    init(capacity: Int = 256) {
        self.capacity = max(capacity, 64)
        base = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// Empties the buffer, giving memory back if a huge value made it grow past `limit`.
    mutating func reset(keepingCapacityUpTo limit: Int) {
        count = 0
        guard capacity > limit else { return }
        base.deallocate()
        capacity = max(limit, 64)
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    @inline(__always)
    mutating func reserve(_ additional: Int) {
        if additional > capacity &- count { grow(additional) }  // Safe: count <= capacity.
    }

    @inline(never)
    private mutating func grow(_ additional: Int) {
        let needed = count + additional
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newBase.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count &+= 1  // Safe: reserved above.
    }

    @inline(__always)
    mutating func append(varint value: UInt64) {
        reserve(10)
        count &+= Varint.write(value, to: base + count)  // Safe: at most 10 bytes, reserved above.
    }

    /// A tag byte of `major` with `number` as its argument (immediate, or `28` and a varint).
    @inline(__always)
    mutating func append(major: ObjectFormat.Major, _ number: UInt64) {
        if number < ObjectFormat.immediateLimit {
            append(major.rawValue << 5 | UInt8(truncatingIfNeeded: number))
        } else {
            append(major.rawValue << 5 | ObjectFormat.varintArgument)
            append(varint: number &- ObjectFormat.immediateLimit)  // Safe: number >= 28.
        }
    }

    @inline(__always)
    mutating func append<T: FixedWidthInteger>(littleEndian value: T) {
        reserve(MemoryLayout<T>.size)
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: T.self)
        count &+= MemoryLayout<T>.size  // Safe: reserved above.
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count &+= bytes.count  // Safe: reserved above.
    }

    /// Appends the UTF-8 of `string` preceded by a tag of `major` with its length.
    mutating func append(major: ObjectFormat.Major, utf8 string: String) {
        var string = string
        string.withUTF8 { utf8 in
            append(major: major, UInt64(utf8.count))
            append(UnsafeRawBufferPointer(utf8))
        }
    }

    /// Overwrites the byte at `offset`, which was written before.
    @inline(__always)
    mutating func set(_ byte: UInt8, at offset: Int) {
        precondition(offset >= 0 && offset < count)
        base.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
    }

    /// Moves the bytes from `offset` on to make room for, and writes, `value` as a varint there.
    mutating func insert(varint value: UInt64, at offset: Int) {
        precondition(offset >= 0 && offset <= count)
        let size = Varint.size(of: value)
        reserve(size)
        let tail = count - offset
        if tail > 0 { (base + offset + size).copyMemory(from: base + offset, byteCount: tail) }
        _ = Varint.write(value, to: base + offset)
        count += size
    }

    /// Drops the last `n` bytes.
    mutating func removeLast(_ n: Int) {
        precondition(n >= 0 && n <= count)
        count -= n
    }

    /// The bytes written. The pointer must not escape `body`.
    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }
}
