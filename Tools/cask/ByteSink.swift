/// A growable byte buffer over raw memory that the export writer appends lines to in place: an
/// append is a capacity check and a copy, with no reference count to touch and no uniqueness to
/// check (what an array's append costs, ten times a line), and the storage is kept from chunk to
/// chunk. Besides ``ByteScan``, the one place of the tool's JSON code with raw pointers; every
/// write is within the capacity just reserved.
///
/// Not thread-safe; owned by one command. The bytes lent by ``withUnsafeBytes(_:)`` must not
/// escape the call.
struct ByteSink: ~Copyable {
    private var storage: UnsafeMutableRawPointer
    private(set) var capacity: Int
    /// The bytes appended so far.
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        storage = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Makes room for `additional` more bytes.
    @inline(__always)
    mutating func reserve(_ additional: Int) {
        if additional > capacity - count { grow(toHold: count + additional) }
    }

    @inline(never)
    private mutating func grow(toHold needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage, byteCount: count)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        // Safe: `bytes.count` bytes fit past `count` (reserved just above).
        if let base = bytes.baseAddress { (storage + count).copyMemory(from: base, byteCount: bytes.count) }
        count += bytes.count
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        // Safe: one byte fits past `count`.
        storage.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { append(UnsafeRawBufferPointer($0)) }
    }

    /// Drops the bytes from `offset` on (`offset` at most ``count``).
    mutating func truncate(to offset: Int) {
        precondition(offset >= 0 && offset <= count)
        count = offset
    }

    mutating func removeAll() { count = 0 }

    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage, count: count))
    }
}
