/// The open segment files by id, as the read path looks them up once per get.
///
/// An array from the lowest id held rather than a dictionary: ids are handed out in increasing
/// order and compaction retires the oldest, so the ids held are nearly contiguous, and a lookup is
/// a subtraction and a bounds check instead of hashing. Slots of retired ids in the middle stay
/// nil; the ends are trimmed. Memory: one word per id between the lowest and the highest held.
/// Not thread-safe: the store guards it with its index lock.
package struct SegmentTable {
    private var files: [SegmentFile?] = []
    /// The id of `files[0]`.
    private var base: UInt32 = 0

    package init() {}

    /// The file of segment `id`, or nil when the store does not hold it. Setting nil removes it.
    package subscript(id: UInt32) -> SegmentFile? {
        get {
            guard id >= base else { return nil }
            let position = Int(id &- base)  // Safe: id >= base.
            return position < files.count ? files[position] : nil
        }
        set {
            if let file = newValue {
                insert(file, at: id)
            } else if id >= base, Int(id - base) < files.count {
                files[Int(id - base)] = nil
                trim()
            }
        }
    }

    /// Whether the table holds no file.
    package var isEmpty: Bool { files.isEmpty }

    package mutating func removeAll() {
        files = []
        base = 0
    }

    private mutating func insert(_ file: SegmentFile, at id: UInt32) {
        if files.isEmpty {
            base = id
            files = [file]
        } else if id < base {
            files.insert(contentsOf: [SegmentFile?](repeating: nil, count: Int(base - id)), at: 0)
            base = id
            files[0] = file
        } else {
            let position = Int(id - base)
            if position >= files.count { files.append(contentsOf: [SegmentFile?](repeating: nil, count: position - files.count + 1)) }
            files[position] = file
        }
    }

    /// Drops the nil slots at both ends.
    private mutating func trim() {
        while let last = files.last, last == nil { files.removeLast() }
        let leading = files.prefix { $0 == nil }.count
        if leading > 0 {
            files.removeFirst(leading)
            base = files.isEmpty ? 0 : base + UInt32(leading)
        }
    }
}
