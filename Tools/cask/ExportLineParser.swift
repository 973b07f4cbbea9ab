#if canImport(Cask)
import Cask  // Base64. The fuzzing build compiles this file into one module with the library's.
#endif

/// One entry of a `cask export` line: a key, its value, and its expiry if it has one.
struct ExportEntry: Equatable {
    var key: [UInt8]
    var value: [UInt8]
    var expiresAtMilliseconds: UInt64?
}

/// Why a line is not an export line; `reason` names the place (a column, 1-based, counted in bytes).
struct ExportLineProblem: Error, Equatable {
    var reason: String
}

/// Reads one line of `cask export` output — a JSON object (RFC 8259) with `"key"` or `"keyBase64"`,
/// `"value"` or `"valueBase64"`, and optionally `"expiresAtMilliseconds"` — strictly, in one pass
/// over its bytes, without Foundation:
///
/// - JSON as RFC 8259 writes it and nothing more: no trailing comma, no comment, no single quotes,
///   no leading zero, no raw control character in a string (escape it), no invalid escape, no lone
///   UTF-16 surrogate, valid UTF-8 throughout; whitespace is space, tab, CR and LF only.
/// - Each field at most once: a duplicate is an error (JSON leaves its meaning open), as is any
///   field the format does not have (so that a misspelt expiry is not silently dropped).
/// - Base64 exactly as RFC 4648 encodes (padded, canonical; see ``Base64``).
/// - A byte-order mark (EF BB BF) only at the start of the input's first line.
///
/// Not thread-safe state: none; a pure function of its input.
enum ExportLineParser {
    /// The fields of a line, by name.
    private enum Field: String, CaseIterable {
        case expiresAtMilliseconds, key, keyBase64, value, valueBase64

        /// The field named by these bytes, compared without making a string.
        init?(_ name: [UInt8]) {
            guard let field = Field.allCases.first(where: { $0.rawValue.utf8.elementsEqual(name) }) else { return nil }
            self = field
        }
    }

    /// The entry `line` describes. `isFirstLine`: the line starts the input (a byte-order mark
    /// may start it).
    static func parse(_ line: ArraySlice<UInt8>, isFirstLine: Bool) throws(ExportLineProblem) -> ExportEntry {
        var cursor = Cursor(line)
        if isFirstLine, cursor.startsWithByteOrderMark { cursor.position += 3 }
        var fields = Fields()
        cursor.skipWhitespace()
        guard let first = cursor.peek() else { throw cursor.problem("not a JSON object: the line is empty") }
        guard first == UInt8(ascii: "{") else {
            if first == 0xEF && cursor.startsWithByteOrderMark(at: cursor.position) {
                throw cursor.problem("a byte-order mark (U+FEFF) is allowed only at the start of the input", at: cursor.position)
            }
            if first == UInt8(ascii: "[") || first == UInt8(ascii: "\"") || first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
                || cursor.literalLength != nil {
                throw cursor.problem("not a JSON object")
            }
            throw cursor.problem("not valid JSON: expected '{'", at: cursor.position)
        }
        cursor.position += 1
        cursor.skipWhitespace()
        if cursor.peek() == UInt8(ascii: "}") {
            cursor.position += 1
        } else {
            while true {
                cursor.skipWhitespace()
                let nameStart = cursor.position
                guard cursor.peek() == UInt8(ascii: "\"") else {
                    throw cursor.problem(cursor.peek() == UInt8(ascii: "}") ? "not valid JSON: a trailing comma before '}'" : "not valid JSON: expected a field name in double quotes", at: nameStart)
                }
                let name = try cursor.string()
                guard let field = Field(name) else {
                    throw cursor.problem("unknown field \"\(String(decoding: name, as: UTF8.self))\" (a line has \"key\" or \"keyBase64\", \"value\" or \"valueBase64\", and may have \"expiresAtMilliseconds\")")
                }
                if fields[field] != nil { throw cursor.problem("the field \"\(field.rawValue)\" appears twice", at: nameStart) }
                cursor.skipWhitespace()
                guard cursor.peek() == UInt8(ascii: ":") else { throw cursor.problem("not valid JSON: expected ':' after \"\(field.rawValue)\"", at: cursor.position) }
                cursor.position += 1
                cursor.skipWhitespace()
                fields[field] = try cursor.value(for: field)
                cursor.skipWhitespace()
                guard let next = cursor.peek() else { throw cursor.problem("not valid JSON: the object is not closed with '}'", at: cursor.position) }
                cursor.position += 1
                if next == UInt8(ascii: "}") { break }
                guard next == UInt8(ascii: ",") else { throw cursor.problem("not valid JSON: expected ',' or '}'", at: cursor.position - 1) }
            }
        }
        cursor.skipWhitespace()
        if !cursor.atEnd { throw cursor.problem("not valid JSON: text after the object", at: cursor.position) }

        func expiry() throws(ExportLineProblem) -> UInt64? {
            switch fields[.expiresAtMilliseconds] {
            case nil: return nil
            case .integer(let time)?: return time
            case .other?, .string?: throw ExportLineProblem(reason: "\"expiresAtMilliseconds\" is not an integer from 0 to \(UInt64.max)")
            }
        }
        let key = try bytes(fields, .key, .keyBase64, "key")
        let value = try bytes(fields, .value, .valueBase64, "value")
        return ExportEntry(key: key, value: value, expiresAtMilliseconds: try expiry())
    }

    /// The bytes of a `name` / `nameBase64` pair, exactly one of which must be present.
    private static func bytes(_ fields: Fields, _ text: Field, _ base64: Field, _ name: String) throws(ExportLineProblem) -> [UInt8] {
        func string(_ field: Field) throws(ExportLineProblem) -> [UInt8]? {
            switch fields[field] {
            case nil: return nil
            case .string(let bytes)?: return bytes
            case .integer?, .other?: throw ExportLineProblem(reason: "\"\(field.rawValue)\" is not a string")
            }
        }
        switch (try string(text), try string(base64)) {
        case (let bytes?, nil):
            return bytes
        case (nil, let encoded?):
            do { return try Base64.decode(encoded[...]) } catch {
                throw ExportLineProblem(reason: "\"\(name)Base64\" is not valid base64: \(Self.describe(error))")
            }
        case (nil, nil):
            throw ExportLineProblem(reason: "no \(name): give \"\(name)\" (UTF-8 text) or \"\(name)Base64\"")
        case (_?, _?):
            throw ExportLineProblem(reason: "both \"\(name)\" and \"\(name)Base64\" (give one)")
        }
    }

    /// The values of a line's fields, by field (a dictionary would cost a hash per field).
    private struct Fields {
        private var values: (FieldValue?, FieldValue?, FieldValue?, FieldValue?, FieldValue?) = (nil, nil, nil, nil, nil)

        subscript(field: Field) -> FieldValue? {
            get {
                switch field {
                case .expiresAtMilliseconds: values.0
                case .key: values.1
                case .keyBase64: values.2
                case .value: values.3
                case .valueBase64: values.4
                }
            }
            set {
                switch field {
                case .expiresAtMilliseconds: values.0 = newValue
                case .key: values.1 = newValue
                case .keyBase64: values.2 = newValue
                case .value: values.3 = newValue
                case .valueBase64: values.4 = newValue
                }
            }
        }
    }

    /// Why a base64 text is refused, as a line's problem says it (offsets within the text).
    private static func describe(_ problem: Base64.Problem) -> String {
        switch problem {
        case .character(let at), .misplacedPadding(let at):
            "it has a character outside the base64 alphabet (or '=' before the end) at offset \(at)"
        case .afterPadding(let at):
            "it goes on after its padding '=' at offset \(at)"
        case .length:
            "its length is not a multiple of 4 (padding with '=' is required)"
        case .nonCanonical:
            "its last character has bits set past the data (not the canonical encoding)"
        }
    }

    /// What a field held: a string's bytes (UTF-8), a non-negative integer that fits 64 bits, or
    /// any other JSON value (checked for syntax, then refused by the field's rules).
    private enum FieldValue {
        case string([UInt8])
        case integer(UInt64)
        case other
    }

    /// A position in the line, and the JSON grammar read from there.
    private struct Cursor {
        let bytes: ArraySlice<UInt8>
        var position: Int

        init(_ bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            position = bytes.startIndex
        }

        var atEnd: Bool { position >= bytes.endIndex }

        func peek() -> UInt8? { position < bytes.endIndex ? bytes[position] : nil }

        var startsWithByteOrderMark: Bool { startsWithByteOrderMark(at: bytes.startIndex) }

        func startsWithByteOrderMark(at index: Int) -> Bool {
            bytes.endIndex - index >= 3 && bytes[index] == 0xEF && bytes[index + 1] == 0xBB && bytes[index + 2] == 0xBF
        }

        func hasWord(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.endIndex - position >= count else { return false }
            return word.withUTF8Buffer { expected in bytes[position..<(position + count)].elementsEqual(expected) }
        }

        /// A problem at a column (1-based) of the line, or of the line as a whole.
        func problem(_ reason: String, at index: Int? = nil) -> ExportLineProblem {
            guard let index else { return ExportLineProblem(reason: reason) }
            return ExportLineProblem(reason: "\(reason) at column \(index - bytes.startIndex + 1)")
        }

        mutating func skipWhitespace() {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
        }

        /// The value of `field`, starting at the current position.
        mutating func value(for field: Field) throws(ExportLineProblem) -> FieldValue {
            guard let byte = peek() else { throw problem("not valid JSON: a value is missing after \"\(field.rawValue)\"", at: position) }
            switch byte {
            case UInt8(ascii: "\""):
                return .string(try string())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try number()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                try skipContainer()
                return .other
            default:
                guard let length = literalLength else {
                    throw problem("not valid JSON: unexpected character '\(Self.shown(byte))' where a value starts", at: position)
                }
                position += length
                return .other
            }
        }

        /// The length of the `true`, `false` or `null` at the cursor, if one is there.
        var literalLength: Int? {
            for word: StaticString in ["true", "false", "null"] where hasWord(word) { return word.utf8CodeUnitCount }
            return nil
        }

        /// Moves past a member's name and its colon, inside an object that must not be one (see
        /// ``skipContainer()``).
        private mutating func skipMemberName() throws(ExportLineProblem) {
            guard peek() == UInt8(ascii: "\"") else { throw problem("not valid JSON: expected a field name in double quotes", at: position) }
            _ = try string()
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw problem("not valid JSON: expected ':'", at: position) }
            position += 1
        }

        /// A JSON number: its value when it is an integer from 0 to `UInt64.max` written without
        /// fraction or exponent, else `.other`.
        mutating func number() throws(ExportLineProblem) -> FieldValue {
            let start = position
            var negative = false
            if peek() == UInt8(ascii: "-") { negative = true; position += 1 }
            guard let first = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
                throw problem("not valid JSON: a number needs a digit after '-'", at: position)
            }
            var value: UInt64? = 0
            if first == UInt8(ascii: "0") {
                position += 1
                if let next = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(next) {
                    throw problem("not valid JSON: a number with a leading zero", at: start)
                }
            } else {
                while let digit = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) {
                    if let current = value {
                        let (times, overflowA) = current.multipliedReportingOverflow(by: 10)
                        let (sum, overflowB) = times.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                        value = overflowA || overflowB ? nil : sum
                    }
                    position += 1
                }
            }
            var integral = true
            if peek() == UInt8(ascii: ".") {
                integral = false
                position += 1
                try digits(after: "'.'")
            }
            if let e = peek(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
                integral = false
                position += 1
                if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { position += 1 }
                try digits(after: "the exponent")
            }
            if integral && !negative, let value { return .integer(value) }
            return .other
        }

        private mutating func digits(after what: String) throws(ExportLineProblem) {
            let start = position
            while let digit = peek(), (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) { position += 1 }
            if position == start { throw problem("not valid JSON: a number needs digits after \(what)", at: position) }
        }

        /// A JSON string starting at the opening quote: its UTF-8 bytes, escapes resolved.
        mutating func string() throws(ExportLineProblem) -> [UInt8] {
            position += 1  // the opening quote
            var output: [UInt8] = []
            // The run of bytes since the last escape, copied in one piece.
            var runStart = position
            while true {
                guard let byte = peek() else { throw problem("not valid JSON: a string is not closed", at: runStart) }
                switch byte {
                case UInt8(ascii: "\""):
                    output += bytes[runStart..<position]
                    position += 1
                    return output
                case UInt8(ascii: "\\"):
                    output += bytes[runStart..<position]
                    try escape(into: &output)
                    runStart = position
                case 0..<0x20:
                    throw problem("not valid JSON: a raw control character (byte 0x\(Self.hex(byte))) in a string; escape it", at: position)
                case 0..<0x80:
                    position += 1
                default:
                    try skipUTF8Sequence()
                }
            }
        }

        /// Checks one UTF-8 sequence starting at a byte of 0x80 or more (RFC 3629: no overlong
        /// forms, no surrogates, nothing past U+10FFFF) and moves past it.
        private mutating func skipUTF8Sequence() throws(ExportLineProblem) {
            let lead = bytes[position]
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
            default: throw problem("not valid UTF-8 (byte 0x\(Self.hex(lead)))", at: position)
            }
            guard bytes.endIndex - position >= length else { throw problem("not valid UTF-8 (a sequence cut short)", at: position) }
            for offset in 1..<length {
                let continuation = bytes[position + offset]
                let range: ClosedRange<UInt8> = offset == 1 ? low...high : 0x80...0xBF
                guard range.contains(continuation) else { throw problem("not valid UTF-8 (byte 0x\(Self.hex(continuation)))", at: position + offset) }
            }
            position += length
        }

        /// Resolves the escape at the backslash under the cursor, appending what it stands for.
        private mutating func escape(into output: inout [UInt8]) throws(ExportLineProblem) {
            let start = position
            position += 1
            guard let letter = peek() else { throw problem("not valid JSON: a string is not closed", at: start) }
            position += 1
            switch letter {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(letter)
            case UInt8(ascii: "b"): output.append(0x08)
            case UInt8(ascii: "f"): output.append(0x0C)
            case UInt8(ascii: "n"): output.append(0x0A)
            case UInt8(ascii: "r"): output.append(0x0D)
            case UInt8(ascii: "t"): output.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hexQuad(escapeAt: start)
                if (0xD800...0xDBFF).contains(scalar) {
                    guard hasWord("\\u") else { throw problem("not valid JSON: \\u\(Self.hex4(scalar)) is a lone UTF-16 surrogate", at: start) }
                    let second = position
                    position += 2
                    let low = try hexQuad(escapeAt: second)
                    guard (0xDC00...0xDFFF).contains(low) else { throw problem("not valid JSON: \\u\(Self.hex4(scalar)) is a lone UTF-16 surrogate", at: start) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw problem("not valid JSON: \\u\(Self.hex4(scalar)) is a lone UTF-16 surrogate", at: start)
                }
                // Safe: not a surrogate, at most U+10FFFF.
                output.append(contentsOf: Unicode.UTF8.encode(Unicode.Scalar(scalar)!)!)
            default:
                throw problem("not valid JSON: an invalid escape '\\\(Self.shown(letter))' in a string", at: start)
            }
        }

        private mutating func hexQuad(escapeAt start: Int) throws(ExportLineProblem) -> UInt32 {
            guard bytes.endIndex - position >= 4 else { throw problem("not valid JSON: \\u needs four hexadecimal digits", at: start) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let digit: UInt32
                switch bytes[position] {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(bytes[position] - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(bytes[position] - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(bytes[position] - UInt8(ascii: "A") + 10)
                default: throw problem("not valid JSON: \\u needs four hexadecimal digits", at: start)
                }
                value = value << 4 | digit
                position += 1
            }
            return value
        }

        /// Moves past an object or array (a value of a field that must not be one), checking its
        /// syntax; nesting is bounded by the line's length and iterative, never recursive.
        private mutating func skipContainer() throws(ExportLineProblem) {
            var closers: [UInt8] = []
            var expectValue = true
            while true {
                skipWhitespace()
                guard let byte = peek() else { throw problem("not valid JSON: an object or array is not closed", at: position) }
                if expectValue {
                    switch byte {
                    case UInt8(ascii: "{"):
                        closers.append(UInt8(ascii: "}"))
                        position += 1
                        skipWhitespace()
                        if peek() == UInt8(ascii: "}") { position += 1; closers.removeLast(); expectValue = false; break }
                        try skipMemberName()
                    case UInt8(ascii: "["):
                        closers.append(UInt8(ascii: "]"))
                        position += 1
                        skipWhitespace()
                        if peek() == UInt8(ascii: "]") { position += 1; closers.removeLast(); expectValue = false }
                    case UInt8(ascii: "\""):
                        _ = try string()
                        expectValue = false
                    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                        _ = try number()
                        expectValue = false
                    default:
                        guard let length = literalLength else {
                            throw problem("not valid JSON: unexpected character '\(Self.shown(byte))' where a value starts", at: position)
                        }
                        position += length
                        expectValue = false
                    }
                } else {
                    guard let closer = closers.last else { return }
                    if byte == closer {
                        position += 1
                        closers.removeLast()
                        if closers.isEmpty { return }
                    } else if byte == UInt8(ascii: ",") {
                        position += 1
                        skipWhitespace()
                        if peek() == closer { throw problem("not valid JSON: a trailing comma", at: position - 1) }
                        if closer == UInt8(ascii: "}") { try skipMemberName() }
                        expectValue = true
                    } else {
                        throw problem("not valid JSON: expected ',' or '\(Self.shown(closer))'", at: position)
                    }
                }
                if !expectValue && closers.isEmpty { return }
            }
        }

        private static func hex(_ byte: UInt8) -> String {
            let digits = Array("0123456789ABCDEF".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
        }

        private static func hex4(_ value: UInt32) -> String { hex(UInt8(value >> 8)) + hex(UInt8(value & 0xFF)) }

        /// A byte as it can be shown in a message: printable ASCII as itself, else `0xHH`.
        private static func shown(_ byte: UInt8) -> String {
            (0x21..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : "0x" + hex(byte)
        }
    }
}
