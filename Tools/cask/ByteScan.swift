#if canImport(Glibc)
import Glibc
#endif

/// The scans of the export-line reader and writer that look at eight bytes at a time: the runs of
/// a JSON string that hold nothing to escape or check, and the newlines of the input. The one
/// place of the tool where its JSON code reads memory through raw pointers; every load is within
/// the buffer's count, as the comments marked "Safe" say, and the callers see indices only.
enum ByteScan {
    /// Eight copies of a byte.
    @inline(__always)
    static func repeated(_ byte: UInt8) -> UInt64 { 0x0101_0101_0101_0101 &* UInt64(byte) }

    /// The high bits of the bytes of `word` (little-endian) that are below 0x20, `"` or `\`: nonzero
    /// exactly when there is such a byte, and its lowest set bit is that of the first one, though a
    /// byte after it may be marked too (`x - 0x01… & ~x & 0x80…` marks a zero byte, and a borrow
    /// runs only upwards, from a byte that is marked; with `0x20…` for `0x01…`, bytes below 0x20;
    /// a byte of 0x80 or more is never marked, as `~x` clears its high bit).
    @inline(__always)
    static func escapeBits(_ word: UInt64) -> UInt64 {
        let high = repeated(0x80)
        let control = (word &- repeated(0x20)) & ~word & high
        let quote = word ^ repeated(UInt8(ascii: "\""))
        let backslash = word ^ repeated(UInt8(ascii: "\\"))
        let quotes = (quote &- repeated(0x01)) & ~quote & high
        let backslashes = (backslash &- repeated(0x01)) & ~backslash & high
        return control | quotes | backslashes
    }

    /// Whether a byte ends a plain run of a JSON string being read: `"`, `\`, below 0x20 (an
    /// error), or 0x80 or more (a UTF-8 sequence to check).
    @inline(__always)
    static func endsPlainRun(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte >= 0x80 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// The index of the first byte at or after `start` that ends a plain run (``endsPlainRun(_:)``),
    /// or `bytes.endIndex`.
    static func plainRunEnd(in bytes: ArraySlice<UInt8>, from start: Int) -> Int {
        bytes.withUnsafeBytes { raw in
            let count = raw.count
            var offset = start - bytes.startIndex
            while count - offset >= 8 {
                // Safe: bytes offset..<offset + 8 are within the buffer.
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                let marks = escapeBits(word) | (word & repeated(0x80))
                if marks != 0 { return bytes.startIndex + offset + marks.trailingZeroBitCount >> 3 }
                offset += 8
            }
            while offset < count, !endsPlainRun(raw[offset]) { offset += 1 }
            return bytes.startIndex + offset
        }
    }

    /// The index of the first newline at or after `start`, or nil.
    static func newline(in bytes: [UInt8], from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        return bytes.withUnsafeBytes { raw in
            // Safe: memchr reads bytes start..<count, all within the buffer.
            guard let found = memchr(raw.baseAddress! + start, Int32(UInt8(ascii: "\n")), raw.count - start) else { return nil }
            return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }
}
