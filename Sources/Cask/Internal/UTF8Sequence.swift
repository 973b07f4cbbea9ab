/// One UTF-8 sequence of two to four bytes, read as RFC 3629 allows it: no overlong form, no
/// surrogate (U+D800–U+DFFF), nothing past U+10FFFF. The one copy of that table: the binary object
/// decoder checks strings and names with it, and in the `cask` tool the export-line parser checks
/// strings, the writer decides between a string and base64, and `KeyEscaping` finds the scalars it
/// shows.
package enum UTF8Sequence {
    /// What the bytes at an index hold.
    package enum Reading: Equatable {
        /// A valid sequence: its scalar value and its length in bytes.
        case scalar(UInt32, length: Int)
        /// The first byte starts no sequence (ASCII is not read here: give it bytes of 0x80 or more).
        case invalidLead
        /// The bytes end before the sequence does.
        case cutShort
        /// The byte `offset` bytes after the lead is not a continuation the lead allows.
        case invalidContinuation(offset: Int)
    }

    /// Reads the sequence that starts at `index` (whose byte must be 0x80 or more).
    @inline(__always)
    package static func read<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at index: Int) -> Reading where Bytes.Index == Int {
        let lead = bytes[index]
        let length: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return .invalidLead
        }
        guard bytes.endIndex - index >= length else { return .cutShort }
        // Safe: the mask keeps the lead's payload bits (5, 4 or 3 of them).
        var value = UInt32(lead) & (0x7F >> length)
        for offset in 1..<length {
            let continuation = bytes[index + offset]
            guard continuation >= (offset == 1 ? low : 0x80) && continuation <= (offset == 1 ? high : 0xBF) else {
                return .invalidContinuation(offset: offset)
            }
            value = value << 6 | UInt32(continuation & 0x3F)
        }
        return .scalar(value, length: length)
    }

    /// Whether `bytes` are valid UTF-8 throughout (an ASCII run is checked a byte at a time, cheaply).
    package static func isValid<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes) -> Bool where Bytes.Index == Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] < 0x80 {
                index += 1
                continue
            }
            guard case .scalar(_, let length) = read(bytes, at: index) else { return false }
            index += length
        }
        return true
    }
}
