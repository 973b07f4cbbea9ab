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
        var text = ""
        text.reserveCapacity(bytes.count)
        var position = 0
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                let scalar = Unicode.UTF8.decode(encoded)
                if scalar == "\\" {
                    text += "\\\\"
                } else if Self.isInvisible(scalar) {
                    for byte in encoded { appendHex(byte, to: &text) }
                } else {
                    text.unicodeScalars.append(scalar)
                }
                position += encoded.count
            case .error(let length):
                for byte in bytes[position..<(position + length)] { appendHex(byte, to: &text) }
                position += length
            case .emptyInput:
                return text
            }
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

    private static func appendHex(_ byte: UInt8, to text: inout String) {
        let digits = Array("0123456789abcdef".unicodeScalars)
        text += "\\x"
        text.unicodeScalars.append(digits[Int(byte >> 4)])
        text.unicodeScalars.append(digits[Int(byte & 0xF)])
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
