// The export-line parser's cursor: a position in the line and the JSON grammar (RFC 8259) read from there.

#if canImport(Cask)
import Cask  // UTF8Sequence. The fuzzing build compiles this file into one module with the library's.
#endif

extension ExportLineParser {
    /// A position in the line, and the JSON grammar read from there.
    struct Cursor {
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

        /// The value of `field`, starting at the current position; a string's bytes (escapes
        /// resolved) are appended to `text`.
        mutating func value(for field: Field, text: inout [UInt8]) throws(ExportLineProblem) -> FieldValue {
            guard let byte = peek() else { throw problem("not valid JSON: a value is missing after \"\(field.rawValue)\"", at: position) }
            switch byte {
            case UInt8(ascii: "\""):
                try string(into: &text)
                return .string
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

        /// The name of the member at the cursor (its opening quote), escapes resolved: the bytes
        /// between the quotes as they are when they hold no escape (the names of the format never
        /// do), else unescaped into `scratch`.
        mutating func memberName(scratch: inout [UInt8]) throws(ExportLineProblem) -> ArraySlice<UInt8> {
            let start = position + 1
            var end = start
            while end < bytes.endIndex {
                let byte = bytes[end]
                if byte == UInt8(ascii: "\"") {
                    position = end + 1
                    return bytes[start..<end]
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
                end += 1
            }
            if !scratch.isEmpty { scratch.removeAll(keepingCapacity: true) }
            try string(into: &scratch)
            return scratch[...]
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
            try skipString()
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

        /// Reads the JSON string that starts at the opening quote under the cursor, appending its
        /// UTF-8 bytes, escapes resolved, to `output`: each run of bytes between escapes is copied
        /// in one piece.
        mutating func string(into output: inout [UInt8]) throws(ExportLineProblem) {
            position += 1  // the opening quote
            var runStart = position
            while true {
                // Past the bytes that are themselves (printable ASCII but '"' and '\\'), eight at a time.
                position = ByteScan.plainRunEnd(in: bytes, from: position)
                guard position < bytes.endIndex else { throw problem("not valid JSON: a string is not closed", at: runStart) }
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: "\""):
                    copy(runStart..<position, to: &output)
                    position += 1
                    return
                case UInt8(ascii: "\\"):
                    copy(runStart..<position, to: &output)
                    try escape(into: &output)
                    runStart = position
                case 0..<0x20:
                    throw problem("not valid JSON: a raw control character (byte 0x\(Self.hex(byte))) in a string; escape it", at: position)
                default:
                    try skipUTF8Sequence()
                }
            }
        }

        /// Appends the line's bytes in `range` to `output`, in one copy.
        @inline(__always)
        private func copy(_ range: Range<Int>, to output: inout [UInt8]) {
            let start = bytes.startIndex
            bytes.withUnsafeBufferPointer { line in
                // Safe: `range` lies within the line, whose indices start at `start`.
                output.append(contentsOf: UnsafeBufferPointer(rebasing: line[(range.lowerBound - start)..<(range.upperBound - start)]))
            }
        }

        /// Checks the JSON string at the cursor and moves past it (a value no field keeps).
        mutating func skipString() throws(ExportLineProblem) {
            var ignored: [UInt8] = []
            try string(into: &ignored)
        }

        /// Checks one UTF-8 sequence starting at a byte of 0x80 or more (RFC 3629: no overlong
        /// forms, no surrogates, nothing past U+10FFFF) and moves past it.
        private mutating func skipUTF8Sequence() throws(ExportLineProblem) {
            switch UTF8Sequence.read(bytes, at: position) {
            case .scalar(_, let length): position += length
            case .invalidLead: throw problem("not valid UTF-8 (byte 0x\(Self.hex(bytes[position])))", at: position)
            case .cutShort: throw problem("not valid UTF-8 (a sequence cut short)", at: position)
            case .invalidContinuation(let offset):
                throw problem("not valid UTF-8 (byte 0x\(Self.hex(bytes[position + offset])))", at: position + offset)
            }
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
                        try skipString()
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
