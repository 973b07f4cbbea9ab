#if canImport(Cask)
import Cask  // Base64. The fuzzing build compiles this file into one module with the library's.
#endif

/// Writes lines of `cask export` output, byte for byte as `JSONEncoder` with sorted keys and
/// unescaped slashes wrote them — `{"expiresAtMilliseconds":…,"key":"…","value":"…"}` — but
/// straight into a byte buffer: no Foundation, no intermediate strings, no allocation per line
/// once the buffer has grown. ``ExportLineParser`` reads every line it writes back to the same entry.
///
/// It reads the key and value through raw buffers (the bytes the store lends during a walk, or an
/// array's), eight bytes at a time where nothing needs escaping (``ByteScan``); every read is within
/// the buffer's count, as the comments marked "Safe" say.
enum ExportLineWriter {
    /// Appends the line of an entry, newline included, to `output`.
    static func append(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>, expiresAtMilliseconds: UInt64?, to output: inout [UInt8]) {
        key.withUnsafeBytes { key in
            value.withUnsafeBytes { value in append(key: key, value: value, expiresAtMilliseconds: expiresAtMilliseconds, to: &output) }
        }
    }

    /// Appends the line of an entry whose bytes are lent (valid during the call), newline included.
    static func append(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, expiresAtMilliseconds: UInt64?, to output: inout [UInt8]) {
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
    private static func appendField(_ name: StaticString, _ bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) {
        append(name, to: &output)
        let start = output.count
        append(#"":""#, to: &output)
        if !appendEscaped(bytes, to: &output) {
            output.removeSubrange(start...)
            append(#"Base64":""#, to: &output)
            Base64.encode(bytes, into: &output)
        }
        output.append(UInt8(ascii: "\""))
    }

    private static func append(_ text: StaticString, to output: inout [UInt8]) {
        text.withUTF8Buffer { output.append(contentsOf: $0) }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Appends the bytes of a JSON string's contents: `"` and `\` escaped, control characters as
    /// `\b \t \n \f \r` or `\u00xx`, everything else as it is. Runs with nothing to escape are
    /// found eight bytes at a time and copied whole; a byte past ASCII is only noted, and then the
    /// bytes are checked as UTF-8 once. Returns false, having appended something to drop, when
    /// they are not UTF-8.
    private static func appendEscaped(_ bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) -> Bool {
        let count = bytes.count
        var runStart = 0
        var index = 0
        var high: UInt64 = 0  // every byte or-ed in: a high bit set when one is past ASCII
        while index < count {
            if count - index >= 8 {
                // Safe: bytes index..<index + 8 are within the buffer.
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                if ByteScan.escapeBits(word) == 0 {
                    high |= word
                    index += 8
                    continue
                }
            }
            // A byte at a time, through the end of this word (or the tail).
            let end = min(count, index + 8)
            while index < end {
                let byte = bytes[index]
                high |= UInt64(byte)
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                    index += 1
                    continue
                }
                // Safe: runStart <= index <= count.
                output.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<index]))
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
                index += 1
                runStart = index
            }
        }
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<count]))
        return high & ByteScan.repeated(0x80) == 0 || UTF8Sequence.isValid(bytes)
    }

    private static func appendDecimal(_ value: UInt64, to output: inout [UInt8]) {
        output += String(value).utf8  // Only keys that expire have one.
    }
}
