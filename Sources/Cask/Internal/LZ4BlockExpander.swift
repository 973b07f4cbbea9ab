/// Expands small LZ4 blocks in Swift, for the read path.
///
/// A get of a compressed value of about 100 bytes spent 30–45 ns in `LZ4_decompress_safe`, whose
/// fast loop needs more output room than such a value has; the loop below takes about half that.
/// It decodes the same block format (FORMAT.md, "LZ4") and enforces the same rules as liblz4's
/// decoder given exactly the expected output size: literal and match lengths within the input and
/// the output, offsets within what was written, the last 5 bytes literals, no match starting in
/// the last 12, and input and output consumed exactly. It accepts no block liblz4 rejects and
/// produces the same bytes (tested against liblz4 on valid and damaged blocks, and fuzzed). Gets
/// expand with it, plain blocks and blocks compressed against a dictionary; every other reader
/// (iteration, `verify`, compaction, repair) goes through ``LZ4Decompressor`` and its offset-0 walk.
package enum LZ4BlockExpander {
    /// The end-of-block rules: the last literals, and the earliest end a match may start before.
    private static let lastLiterals = 5
    private static let matchStartLimit = 12

    /// Whether a block (one liblz4 accepted) has a match with offset 0, which the block format does
    /// not allow and liblz4's decoder does not reject. Walks the sequences without expanding them:
    /// O(sequences). A block whose structure does not parse answers false (the decoder judged it).
    package static func hasZeroMatchOffset(_ source: UnsafeRawBufferPointer) -> Bool {
        guard let input = source.baseAddress else { return false }
        let inputEnd = source.count
        var ip = 0
        while ip < inputEnd {
            let token = Int(input.load(fromByteOffset: ip, as: UInt8.self))
            ip &+= 1  // Safe: ip < inputEnd.
            var literals = token >> 4
            if literals == 15 {
                guard let more = extendedLength(input, &ip, inputEnd) else { return false }
                literals += more
            }
            guard literals <= inputEnd - ip else { return false }
            ip += literals
            if ip == inputEnd { return false }  // The last sequence: literals only.
            guard inputEnd - ip >= 2 else { return false }
            let offset = Int(input.load(fromByteOffset: ip, as: UInt8.self)) | Int(input.load(fromByteOffset: ip + 1, as: UInt8.self)) << 8
            if offset == 0 { return true }
            ip += 2
            if token & 15 == 15 {
                guard extendedLength(input, &ip, inputEnd) != nil else { return false }
            }
        }
        return false
    }

    /// Expands the block in `source`, which must produce exactly `destination.count` bytes, into
    /// `destination`. Returns false for an invalid block; then some of `destination` may have been
    /// written. Never reads or writes outside the buffers. O(source + destination).
    ///
    /// With a `dictionary` (a block compressed against one, FORMAT.md "Dictionary files"), its
    /// content comes right before the output: a match may reach back into it, as with
    /// `LZ4_decompress_safe_usingDict`. Unlike liblz4, it refuses a match offset of 0 as it goes,
    /// without a second walk over the block (``hasZeroMatchOffset(_:)``).
    ///
    /// Copies go 16 bytes at a time where both buffers have 16 bytes of room past the copy (and
    /// the source is at least 16 bytes behind the target), instead of a call of `memmove` per
    /// literal run and per match.
    package static func expand(
        _ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, dictionary: UnsafeRawBufferPointer? = nil
    ) -> Bool {
        let count = destination.count
        guard let input = source.baseAddress, let output = destination.baseAddress, source.count > 0 else { return false }
        // Nothing to produce: only the one-byte empty block, as liblz4 has it.
        if count == 0 { return source.count == 1 && input.load(as: UInt8.self) == 0 }
        let dictionaryCount = dictionary?.count ?? 0
        let inputEnd = source.count
        var ip = 0, op = 0
        while true {
            // Token: literal length in the high half, match length − 4 in the low half.
            guard ip < inputEnd else { return false }
            let token = Int(input.load(fromByteOffset: ip, as: UInt8.self))
            ip &+= 1  // Safe: ip < inputEnd.
            var literals = token >> 4
            if literals == 15 {
                guard let more = extendedLength(input, &ip, inputEnd) else { return false }
                literals += more
            }
            guard literals <= inputEnd - ip, literals <= count - op else { return false }
            let literalsEnd = op + literals
            // A sequence whose literals reach into the last 12 bytes, or leave too little input for
            // an offset, a token and the last literals, must be the last one (liblz4's rule).
            let mustBeLast = literalsEnd > count - matchStartLimit || ip + literals > inputEnd - (2 + 1 + lastLiterals)
            if literals > 0 {
                if literals + 16 <= inputEnd - ip && literals + 16 <= count - op {
                    wideCopy16(output + op, input + ip, literals)
                } else {
                    (output + op).copyMemory(from: input + ip, byteCount: literals)
                }
            }
            ip += literals
            op = literalsEnd
            if mustBeLast || ip == inputEnd { return ip == inputEnd && op == count }

            // Match: a 2-byte offset back into the output (or the dictionary before it), then the length.
            guard inputEnd - ip >= 2 else { return false }
            let offset = Int(input.load(fromByteOffset: ip, as: UInt8.self)) | Int(input.load(fromByteOffset: ip + 1, as: UInt8.self)) << 8
            ip += 2
            guard offset >= 1, offset <= op + dictionaryCount else { return false }
            var length = token & 15
            if length == 15 {
                guard let more = extendedLength(input, &ip, inputEnd) else { return false }
                length += more
            }
            length += 4
            guard length <= count - lastLiterals - op else { return false }
            if offset > op, let dictionaryStart = dictionary?.baseAddress {
                // The match starts `back` bytes before the dictionary's end and goes on, if it is
                // longer, from the start of the output: `offset` back from where it then is.
                let back = offset - op  // Safe: offset > op; at most dictionaryCount.
                let taken = min(length, back)
                let from = dictionaryStart + (dictionaryCount - back)
                if back - taken >= 16 && taken + 16 <= count - op {
                    wideCopy16(output + op, from, taken)
                } else {
                    (output + op).copyMemory(from: from, byteCount: taken)
                }
                op += taken
                length -= taken
                if length == 0 { continue }
            }
            let target = output + op
            if offset >= 16 && length + 16 <= count - op {
                wideCopy16(target, target - offset, length)
            } else if offset >= 8 && length + 8 <= count - op {
                var done = 0
                repeat {
                    target.storeBytes(of: (target - offset).loadUnaligned(fromByteOffset: done, as: UInt64.self), toByteOffset: done, as: UInt64.self)
                    done &+= 8
                } while done < length
            } else if offset >= length {
                target.copyMemory(from: target - offset, byteCount: length)
            } else if offset == 1 {
                target.initializeMemory(as: UInt8.self, repeating: (target - 1).load(as: UInt8.self), count: length)
            } else {
                // Overlapping: each byte may be one this match just wrote.
                for position in 0..<length {
                    target.storeBytes(of: (target - offset).load(fromByteOffset: position, as: UInt8.self), toByteOffset: position, as: UInt8.self)
                }
            }
            op += length
        }
    }

    /// Copies `count` bytes (at least 1) 16 at a time: it writes up to 15 bytes past `target +
    /// count` and reads as many past `source + count`, which the caller keeps inside their buffers;
    /// when the two overlap, `source` is at least 16 bytes before `target`, so that every chunk reads
    /// bytes already written.
    @inline(__always)
    private static func wideCopy16(_ target: UnsafeMutableRawPointer, _ source: UnsafeRawPointer, _ count: Int) {
        var done = 0
        repeat {
            target.storeBytes(of: source.loadUnaligned(fromByteOffset: done, as: SIMD16<UInt8>.self), toByteOffset: done, as: SIMD16<UInt8>.self)
            done &+= 16
        } while done < count
    }

    /// The bytes added to a length of 15: each following byte, up to and including the first
    /// that is not 255. Nil when the input ends first, or the length passes any block's size.
    @inline(__always)
    private static func extendedLength(_ input: UnsafeRawPointer, _ ip: inout Int, _ inputEnd: Int) -> Int? {
        var total = 0
        while ip < inputEnd {
            let byte = Int(input.load(fromByteOffset: ip, as: UInt8.self))
            ip &+= 1  // Safe: ip < inputEnd.
            total += byte
            if byte != 255 { return total }
            if total > Int(Int32.max) { return nil }
        }
        return nil
    }
}
