/// Base64 as RFC 4648 §4 defines it (the standard alphabet, `=` padding), read strictly: the
/// encoding of some bytes is exactly one text, and no other text decodes. Bytes in, bytes out: no
/// Foundation, no intermediate strings. The one base64 codec of the package: `cask import` and
/// `export` lines, and `<data>` in XML property lists (which allow white space between characters).
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Appends the padded encoding of `bytes` to `output`.
    package static func encode(_ bytes: ArraySlice<UInt8>, into output: inout [UInt8]) {
        bytes.withUnsafeBytes { encode($0, into: &output) }
    }

    /// Appends the padded encoding of `bytes` to `output` (bytes lent by the store, not copied first).
    package static func encode(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8]) {
        output.reserveCapacity(output.count + (bytes.count + 2) / 3 * 4)
        var index = bytes.startIndex
        while bytes.endIndex - index >= 3 {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(group >> 18)])
            output.append(alphabet[Int(group >> 12 & 63)])
            output.append(alphabet[Int(group >> 6 & 63)])
            output.append(alphabet[Int(group & 63)])
            index += 3
        }
        switch bytes.endIndex - index {
        case 1:
            let group = UInt32(bytes[index]) << 16
            output += [alphabet[Int(group >> 18)], alphabet[Int(group >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        case 2:
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output += [alphabet[Int(group >> 18)], alphabet[Int(group >> 12 & 63)], alphabet[Int(group >> 6 & 63)], UInt8(ascii: "=")]
        default:
            break
        }
    }

    /// Why a text is not canonical base64. Each offset is an index into the text decoded.
    package enum Problem: Error, Equatable {
        /// A byte outside the alphabet (white space too, unless skipped).
        case character(at: Int)
        /// `=` where no padding can be: before two characters of a group, or a third `=`.
        case misplacedPadding(at: Int)
        /// A character after the padding.
        case afterPadding(at: Int)
        /// `characters` (padding included) is not a multiple of 4; `last` is the last one's offset.
        case length(characters: Int, last: Int)
        /// The bits after the last whole byte are not zero (another text encodes these bytes); the
        /// text ends with `padding` `=`, the last at `last`.
        case nonCanonical(padding: Int, last: Int)
    }

    /// The bytes `text` encodes; throws unless `text` is exactly their padded encoding (with
    /// `skippingWhiteSpace`, give or take space, tab, CR, LF and form feed between characters).
    package static func decode(_ text: ArraySlice<UInt8>, skippingWhiteSpace: Bool = false) throws(Problem) -> [UInt8] {
        var output: [UInt8] = []
        try decode(text, skippingWhiteSpace: skippingWhiteSpace, appendingTo: &output)
        return output
    }

    /// Appends the bytes `text` encodes to `output` (a buffer reused line after line), under the
    /// rules of ``decode(_:skippingWhiteSpace:)``; on a throw, `output` may hold part of them.
    package static func decode(_ text: ArraySlice<UInt8>, skippingWhiteSpace: Bool = false, appendingTo output: inout [UInt8]) throws(Problem) {
        let base = output.count
        output.reserveCapacity(base + text.count / 4 * 3)
        var group: UInt32 = 0, inGroup = 0, padding = 0, last = text.startIndex
        for index in text.indices {
            let byte = text[index]
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                guard inGroup >= 2, inGroup + padding < 4 else { throw .misplacedPadding(at: index) }
                padding += 1
                last = index
                continue
            case 0x20, 0x09, 0x0A, 0x0D, 0x0C:
                if skippingWhiteSpace { continue }
                throw .character(at: index)
            default:
                throw .character(at: index)
            }
            guard padding == 0 else { throw .afterPadding(at: index) }
            last = index
            group = group << 6 | UInt32(value)
            inGroup += 1
            if inGroup == 4 {
                output.append(UInt8(group >> 16))
                output.append(UInt8(group >> 8 & 0xFF))
                output.append(UInt8(group & 0xFF))
                group = 0
                inGroup = 0
            }
        }
        guard (inGroup + padding) % 4 == 0 else { throw .length(characters: (output.count - base) / 3 * 4 + inGroup + padding, last: last) }
        if inGroup == 2 {
            guard group & 0x0F == 0 else { throw .nonCanonical(padding: 2, last: last) }
            output.append(UInt8(group >> 4))
        } else if inGroup == 3 {
            guard group & 0x03 == 0 else { throw .nonCanonical(padding: 1, last: last) }
            output += [UInt8(group >> 10), UInt8(group >> 2 & 0xFF)]
        }
    }
}
