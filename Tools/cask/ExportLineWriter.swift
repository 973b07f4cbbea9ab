#if canImport(Cask)
import Cask  // Base64. The fuzzing build compiles this file into one module with the library's.
#endif

/// Writes lines of `cask export` output, byte for byte as `JSONEncoder` with sorted keys and
/// unescaped slashes wrote them — `{"expiresAtMilliseconds":…,"key":"…","value":"…"}` — but
/// straight into a byte buffer: no Foundation, no intermediate strings, no allocation per line
/// once the buffer has grown. ``ExportLineParser`` reads every line it writes back to the same entry.
enum ExportLineWriter {
    /// Appends the line of `entry`, newline included, to `output`.
    static func append(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>, expiresAtMilliseconds: UInt64?, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        if let expiry = expiresAtMilliseconds {
            output += #""expiresAtMilliseconds":"#.utf8
            appendDecimal(expiry, to: &output)
            output.append(UInt8(ascii: ","))
        }
        appendField("key", key, to: &output)
        output.append(UInt8(ascii: ","))
        appendField("value", value, to: &output)
        output += "}\n".utf8
    }

    /// `"name":"text"` when `bytes` are valid UTF-8, else `"nameBase64":"…"`.
    private static func appendField(_ name: StaticString, _ bytes: ArraySlice<UInt8>, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { output += $0 }
        if isValidUTF8(bytes) {
            output += "\":\"".utf8
            appendEscaped(bytes, to: &output)
        } else {
            output += "Base64\":\"".utf8
            Base64.encode(bytes, into: &output)
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func isValidUTF8(_ bytes: ArraySlice<UInt8>) -> Bool {
        if bytes.allSatisfy({ $0 < 0x80 }) { return true }
        return String(validating: bytes, as: UTF8.self) != nil
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The bytes of a JSON string's contents: `"` and `\` escaped, control characters as `\b \t \n
    /// \f \r` or `\u00xx`, everything else as it is.
    private static func appendEscaped(_ bytes: ArraySlice<UInt8>, to output: inout [UInt8]) {
        var runStart = bytes.startIndex
        for index in bytes.indices {
            let byte = bytes[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            output += bytes[runStart..<index]
            runStart = index + 1
            switch byte {
            case UInt8(ascii: "\""): output += #"\""#.utf8
            case UInt8(ascii: "\\"): output += #"\\"#.utf8
            case 0x08: output += #"\b"#.utf8
            case 0x09: output += #"\t"#.utf8
            case 0x0A: output += #"\n"#.utf8
            case 0x0C: output += #"\f"#.utf8
            case 0x0D: output += #"\r"#.utf8
            default: output += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 15)]]
            }
        }
        output += bytes[runStart...]
    }

    private static func appendDecimal(_ value: UInt64, to output: inout [UInt8]) {
        output += String(value).utf8  // Only keys that expire have one.
    }
}
