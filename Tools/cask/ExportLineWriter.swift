#if canImport(Cask)
import Cask  // Base64. The fuzzing build compiles this file into one module with the library's.
#endif

/// Writes lines of `cask export` output, byte for byte as `JSONEncoder` with sorted keys and
/// unescaped slashes wrote them — `{"expiresAtMilliseconds":…,"key":"…","value":"…"}` — but
/// straight into a byte buffer (``ByteSink``): no Foundation, no intermediate strings, no
/// allocation per line once the buffer has grown (a base64 field aside). ``ExportLineParser`` reads every line it writes back to the same entry.
///
/// It reads the key and value through raw buffers (the bytes the store lends during a walk, or an
/// array's), eight bytes at a time where nothing needs escaping (``ByteScan``); every read is within
/// the buffer's count, as the comments marked "Safe" say.
enum ExportLineWriter {
    /// Appends the line of an entry, newline included, to `output`.
    static func append(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>, expiresAtMilliseconds: UInt64?, to output: inout [UInt8]) {
        var line = ByteSink(capacity: 64 + key.count + value.count)
        key.withUnsafeBytes { key in
            value.withUnsafeBytes { value in append(key: key, value: value, expiresAtMilliseconds: expiresAtMilliseconds, to: &line) }
        }
        line.withUnsafeBytes { output.append(contentsOf: $0) }
    }

    /// Appends the line of an entry whose bytes are lent (valid during the call), newline included.
    static func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, expiresAtMilliseconds: UInt64?, to output: inout ByteSink) {
        output.append(UInt8(ascii: "{"))
        if let expiry = expiresAtMilliseconds {
            append(#""expiresAtMilliseconds":"#, to: &output)
            appendDecimal(expiry, to: &output)
            output.append(UInt8(ascii: ","))
        }
        appendField(#""key"#, key, to: &output)
        output.append(UInt8(ascii: ","))
        appendField(#""value"#, value, to: &output)
        append("}\n", to: &output)
    }

    /// `"name":"text"` when `bytes` are valid UTF-8, else `"nameBase64":"…"`; `name` comes with
    /// its opening quote.
    private static func appendField(_ name: StaticString, _ bytes: UnsafeRawBufferPointer, to output: inout ByteSink) {
        append(name, to: &output)
        let start = output.count
        append(#"":""#, to: &output)
        if !appendEscaped(bytes, to: &output) {
            output.truncate(to: start)
            append(#"Base64":""#, to: &output)
            var encoded: [UInt8] = []
            Base64.encode(bytes, into: &encoded)
            encoded.withUnsafeBytes { output.append($0) }
        }
        output.append(UInt8(ascii: "\""))
    }

    @inline(__always)
    private static func append(_ text: StaticString, to output: inout ByteSink) {
        output.append(text)
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Appends the bytes of a JSON string's contents: `"` and `\` escaped, control characters as
    /// `\b \t \n \f \r` or `\u00xx`, everything else as it is. The next byte to escape is found
    /// eight bytes at a time (``ByteScan/escapeBits(_:)`` marks the first exactly) and the run
    /// before it copied whole; a byte past ASCII is only noted, and then the bytes are checked as
    /// UTF-8 once. Returns false, having appended something to drop, when they are not UTF-8.
    private static func appendEscaped(_ bytes: UnsafeRawBufferPointer, to output: inout ByteSink) -> Bool {
        let count = bytes.count
        var runStart = 0
        var index = 0
        var high: UInt64 = 0  // bytes or-ed in: a high bit set when one is past ASCII
        while true {
            var found = count
            while count - index >= 8 {
                // Safe: bytes index..<index + 8 are within the buffer.
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                high |= word
                let marks = ByteScan.escapeBits(word)
                if marks != 0 {
                    found = index + marks.trailingZeroBitCount >> 3
                    break
                }
                index += 8
            }
            if found == count {
                while index < count {
                    let byte = bytes[index]
                    high |= UInt64(byte)
                    if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                        found = index
                        break
                    }
                    index += 1
                }
            }
            guard found < count else { break }
            // Safe: runStart <= found < count.
            output.append(UnsafeRawBufferPointer(rebasing: bytes[runStart..<found]))
            let byte = bytes[found]
            switch byte {
            case UInt8(ascii: "\""): append(#"\""#, to: &output)
            case UInt8(ascii: "\\"): append(#"\\"#, to: &output)
            case 0x08: append(#"\b"#, to: &output)
            case 0x09: append(#"\t"#, to: &output)
            case 0x0A: append(#"\n"#, to: &output)
            case 0x0C: append(#"\f"#, to: &output)
            case 0x0D: append(#"\r"#, to: &output)
            default:
                append(#"\u00"#, to: &output)
                hexDigits.withUTF8Buffer { digits in
                    output.append(digits[Int(byte >> 4)])
                    output.append(digits[Int(byte & 15)])
                }
            }
            index = found + 1
            runStart = index
        }
        output.append(UnsafeRawBufferPointer(rebasing: bytes[runStart..<count]))
        return high & ByteScan.repeated(0x80) == 0 || UTF8Sequence.isValid(bytes)
    }

    private static func appendDecimal(_ value: UInt64, to output: inout ByteSink) {
        var digits = String(value)  // Only keys that expire have one.
        digits.withUTF8 { output.append(UnsafeRawBufferPointer($0)) }
    }
}
