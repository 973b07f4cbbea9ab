// The ordered index's key order: comparing keys, and sorting arena positions by their keys.

extension OrderedKeys {
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

    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = Swift.min(a.count, b.count)
        if common > 0 {
            let order = memcmp(a.baseAddress!, b.baseAddress!, common)
            if order != 0 { return Int(order) }
        }
        return a.count - b.count
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
