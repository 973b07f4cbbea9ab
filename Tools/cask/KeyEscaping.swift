import Cask  // UTF8Sequence

/// How the tool shows key bytes as text, and reads them back.
///
/// A key is shown as its UTF-8 text, except that each byte that is not part of printable UTF-8
/// (invalid UTF-8, control characters such as newline, tab or DEL, and invisible format characters
/// such as zero-width spaces, bidirectional overrides and line separators) is shown as `\xHH`
/// (two lowercase hex digits), and a backslash as `\\`. So every key fits on one line, nothing
/// invisible reaches the terminal, and the text maps back to exactly one key: `--escaped` reads it.
enum KeyEscaping {
    static let escapedFlag = CommandHelp.Option(
        name: "escaped", valueName: nil,
        help: "Read keys and prefixes with the escapes 'cask list' prints: \\xHH for a byte, \\\\ for a backslash.")

    static func escape(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count)
        append(bytes, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends the escaped text of `bytes` (as UTF-8) to `output`, without making a string: how
    /// `cask list` prints a million keys. Printable ASCII, the common case, is copied byte by byte;
    /// only a byte of 0x80 or more starts the decoding of a scalar and the look-up of its category.
    static func append<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, to output: inout [UInt8]) where Bytes.Index == Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte < 0x80 {
                if byte == UInt8(ascii: "\\") {
                    output.append(byte)
                    output.append(byte)
                } else if byte >= 0x20 && byte != 0x7F {
                    output.append(byte)
                } else {
                    appendHex(byte, to: &output)  // C0 controls and DEL
                }
                index += 1
                continue
            }
            // A byte that starts no valid sequence is escaped alone, and the next byte is looked at
            // afresh: the same text as escaping each maximal invalid subpart byte by byte, since the
            // bytes after a lead in such a subpart are continuation bytes, which start nothing.
            guard case .scalar(let value, let length) = UTF8Sequence.read(bytes, at: index), let scalar = Unicode.Scalar(value) else {
                appendHex(byte, to: &output)
                index += 1
                continue
            }
            let sequence = bytes[index..<(index + length)]
            if isInvisible(scalar) {
                for byte in sequence { appendHex(byte, to: &output) }
            } else {
                output.append(contentsOf: sequence)
            }
            index += length
        }
    }

    struct InvalidEscape: Error {
        var offset: Int
    }

    static func unescape(_ bytes: [UInt8]) throws(InvalidEscape) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\\") else {
                result.append(byte)
                index += 1
                continue
            }
            guard index + 1 < bytes.count else { throw InvalidEscape(offset: index) }
            switch bytes[index + 1] {
            case UInt8(ascii: "\\"):
                result.append(byte)
                index += 2
            case UInt8(ascii: "x"):
                guard index + 3 < bytes.count, let high = hexValue(bytes[index + 2]), let low = hexValue(bytes[index + 3]) else {
                    throw InvalidEscape(offset: index)
                }
                result.append(high << 4 | low)
                index += 4
            default:
                throw InvalidEscape(offset: index)
            }
        }
        return result
    }

    private static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func appendHex(_ byte: UInt8, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\\"))
        output.append(UInt8(ascii: "x"))
        output.append(hexDigits[Int(byte >> 4)])
        output.append(hexDigits[Int(byte & 0xF)])
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
