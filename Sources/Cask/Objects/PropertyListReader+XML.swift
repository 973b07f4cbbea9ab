import Foundation

/// Reads an XML property list for ``PropertyListReader``: UTF-8 (a byte-order mark is allowed), an
/// optional `<?xml …?>` declaration, comments, processing instructions and one `<!DOCTYPE …>`, then
/// a `<plist>` element holding one `<dict>` — or a bare `<dict>` as the document's element, which
/// CoreFoundation accepts too.
///
/// Strict where writers are: the elements `dict key string integer real true false date data
/// array` only, attributes on `<plist>` only, a value after every key, no key twice, no text
/// between elements, nothing but comments and white space after the document's element. Text may
/// use the five predefined entities, numeric character references and CDATA sections. `<integer>`
/// is decimal or `0x` hexadecimal with an optional sign; `<real>` decimal or `nan`/`inf`/`infinity`
/// with an optional sign; `<date>` exactly `YYYY-MM-DDTHH:MM:SSZ`; `<data>` RFC 4648 base64 with
/// white space between characters, padding required, and the unused bits zero.
struct XMLPropertyListParser {
    private typealias Error = PropertyListReader.Error

    private let bytes: [UInt8]
    /// Where the text starts, after a byte-order mark.
    private let start: Int
    private var position: Int
    private var state: PropertyListEntryState

    /// An element's start tag.
    private struct Tag {
        var name: String
        /// Where its `<` is.
        var offset: Int
        /// `<name/>`: no content and no end tag.
        var empty: Bool
    }

    init(_ bytes: [UInt8], start: Int) {
        self.bytes = bytes
        self.start = start
        position = start
        state = PropertyListEntryState(fileSize: bytes.count)
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    private static let valueElements: Set<String> = ["dict", "string", "integer", "real", "true", "false", "date", "data", "array"]

    mutating func readDictionary() throws(PropertyListReader.Error) -> [PropertyListReader.Entry] {
        try checkUTF8()
        try prolog()
        let root = try element(inside: nil)
        var entries: [PropertyListReader.Entry]
        switch root.name {
        case "plist":
            guard !root.empty else { throw fail(at: root.offset, "the <plist> element holds no value") }
            try skipMisc()
            guard !looking(at: "</") else { throw fail(at: position, "the <plist> element holds no value") }
            let top = try element(inside: root)
            entries = try topDictionary(top)
            try skipMisc()
            if !looking(at: "</") && position < bytes.count {
                throw fail(at: position, "a second value in <plist>, which holds one")
            }
            try endTag(of: root)
        default:
            entries = try topDictionary(root)
        }
        try skipMisc()
        guard position == bytes.count else {
            throw fail(at: position, "\(describeHere()) after the end of the document's element")
        }
        return entries
    }

    private mutating func topDictionary(_ tag: Tag) throws(PropertyListReader.Error) -> [PropertyListReader.Entry] {
        guard tag.name == "dict" else {
            if Self.valueElements.contains(tag.name) {
                throw fail(at: tag.offset, "the top level is <\(tag.name)>, not a dictionary")
            }
            throw fail(at: tag.offset, "<\(tag.name)> is not a property-list element")
        }
        guard state.countValue() else { throw fail(at: tag.offset, state.tooManyValues) }
        var entries: [PropertyListReader.Entry] = []
        guard !tag.empty else { return entries }
        var names: Set<String> = []
        while true {
            try skipMisc()
            if looking(at: "</") { break }
            let keyTag = try element(inside: tag)
            let name = try key(keyTag)
            guard names.insert(name).inserted else {
                throw fail(at: keyTag.offset, "the dictionary has the key '\(PropertyListReader.describe(name))' twice")
            }
            try skipMisc()
            guard !looking(at: "</") else { throw fail(at: position, "the key '\(PropertyListReader.describe(name))' has no value") }
            state.startEntry(name)
            let value = try value(element(inside: tag), depth: 1)
            entries.append(state.entry(name, value))
        }
        try endTag(of: tag)
        return entries
    }

    /// The text of a `<key>` start tag `tag` (which must be one) and its end.
    private mutating func key(_ tag: Tag) throws(PropertyListReader.Error) -> String {
        guard tag.name == "key" else {
            throw fail(at: tag.offset, "<\(tag.name)> where a <key> was expected in <dict>")
        }
        guard state.countValue() else { throw fail(at: tag.offset, state.tooManyValues) }
        return try text(of: tag)
    }

    // MARK: Values

    private mutating func value(_ tag: Tag, depth: Int) throws(PropertyListReader.Error) -> PropertyListValue {
        guard state.countValue() else { throw fail(at: tag.offset, state.tooManyValues) }
        switch tag.name {
        case "string":
            return .string(try text(of: tag))
        case "true", "false":
            if !tag.empty {
                guard looking(at: "</") else { throw fail(at: position, "<\(tag.name)> holds \(describeHere()); it must be empty") }
                try endTag(of: tag)
            }
            return .bool(tag.name == "true")
        case "integer":
            let text = try self.text(of: tag)
            return try integer(text, at: tag.offset)
        case "real":
            let text = try self.text(of: tag)
            guard let real = Self.real(text) else {
                throw fail(at: tag.offset, "<real> holds '\(PropertyListReader.describe(text))', not a decimal number, nan or infinity")
            }
            return .real(real)
        case "date":
            let text = try self.text(of: tag)
            guard let seconds = Self.date(text) else {
                throw fail(at: tag.offset, "<date> holds '\(PropertyListReader.describe(text))', not a date YYYY-MM-DDTHH:MM:SSZ")
            }
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        case "data":
            return .data(try data(tag))
        case "array":
            guard state.enterContainer(depth: depth) else { throw fail(at: tag.offset, state.documentTooDeep) }
            var values: [PropertyListValue] = []
            guard !tag.empty else { return .array(values) }
            while true {
                try skipMisc()
                if looking(at: "</") { break }
                let element = try element(inside: tag)
                state.path.append(.index(values.count))
                values.append(try value(element, depth: depth + 1))
                state.path.removeLast()
            }
            try endTag(of: tag)
            return .array(values)
        case "dict":
            guard state.enterContainer(depth: depth) else { throw fail(at: tag.offset, state.documentTooDeep) }
            var values: [String: PropertyListValue] = [:]
            guard !tag.empty else { return .dictionary(values) }
            while true {
                try skipMisc()
                if looking(at: "</") { break }
                let keyTag = try element(inside: tag)
                let name = try key(keyTag)
                guard values[name] == nil else {
                    throw fail(at: keyTag.offset, "the dictionary has the key '\(PropertyListReader.describe(name))' twice")
                }
                try skipMisc()
                guard !looking(at: "</") else { throw fail(at: position, "the key '\(PropertyListReader.describe(name))' has no value") }
                let element = try element(inside: tag)
                state.path.append(.key(name))
                values[name] = try value(element, depth: depth + 1)
                state.path.removeLast()
            }
            try endTag(of: tag)
            return .dictionary(values)
        case "key":
            throw fail(at: tag.offset, "a <key> outside a <dict>")
        case "plist":
            throw fail(at: tag.offset, "<plist> inside another element")
        default:
            throw fail(at: tag.offset, "<\(tag.name)> is not a property-list element")
        }
    }

    private mutating func integer(_ text: String, at offset: Int) throws(PropertyListReader.Error) -> PropertyListValue {
        var digits = Substring(text)
        let negative = digits.first == "-"
        if digits.first == "-" || digits.first == "+" { digits = digits.dropFirst() }
        var radix: UInt64 = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            radix = 16
            digits = digits.dropFirst(2)
        }
        var magnitude: UInt64 = 0
        var overflow = false
        for character in digits.utf8 {
            guard let digit = Self.digit(character, radix: radix) else {
                throw fail(at: offset, "<integer> holds '\(PropertyListReader.describe(text))', not a decimal or 0x hexadecimal integer")
            }
            let (shifted, o1) = magnitude.multipliedReportingOverflow(by: radix)
            let (sum, o2) = shifted.addingReportingOverflow(digit)
            overflow = overflow || o1 || o2
            magnitude = sum
        }
        guard !digits.isEmpty else {
            throw fail(at: offset, text.isEmpty ? "an empty <integer>" : "<integer> holds '\(PropertyListReader.describe(text))', not a decimal or 0x hexadecimal integer")
        }
        let limit = negative ? UInt64(Int.max) + 1 : UInt64(Int.max)
        guard !overflow, magnitude <= limit else {
            state.skipEntry(PropertyListReader.integerOutOfRange(text))
            return .integer(0)
        }
        return .integer(negative ? Int(truncatingIfNeeded: 0 &- magnitude) : Int(magnitude))  // Safe: magnitude ≤ limit.
    }

    private static func digit(_ character: UInt8, radix: UInt64) -> UInt64? {
        let value: UInt64
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt64(character - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): value = UInt64(character - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): value = UInt64(character - UInt8(ascii: "A")) + 10
        default: return nil
        }
        return value < radix ? value : nil
    }

    /// A `<real>`'s text: `[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?`, or nan / inf / infinity.
    static func real(_ text: String) -> Double? {
        switch text.lowercased() {
        case "nan", "+nan", "-nan": return .nan
        case "inf", "+inf", "infinity", "+infinity": return .infinity
        case "-inf", "-infinity": return -.infinity
        default: break
        }
        let utf8 = Array(text.utf8)
        var index = 0
        func digits() -> Int {
            let first = index
            while index < utf8.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(utf8[index]) { index += 1 }
            return index - first
        }
        if index < utf8.count, utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-") { index += 1 }
        var mantissa = digits()
        if index < utf8.count, utf8[index] == UInt8(ascii: ".") {
            index += 1
            mantissa += digits()
        }
        guard mantissa > 0 else { return nil }
        if index < utf8.count, utf8[index] == UInt8(ascii: "e") || utf8[index] == UInt8(ascii: "E") {
            index += 1
            if index < utf8.count, utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return nil }
        }
        guard index == utf8.count else { return nil }
        return Double(text)
    }

    /// A `<date>`'s text, `YYYY-MM-DDTHH:MM:SSZ`, as seconds since 2001-01-01 00:00:00 UTC.
    static func date(_ text: String) -> Double? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 20, utf8[4] == UInt8(ascii: "-"), utf8[7] == UInt8(ascii: "-"), utf8[10] == UInt8(ascii: "T"),
              utf8[13] == UInt8(ascii: ":"), utf8[16] == UInt8(ascii: ":"), utf8[19] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(utf8[index]) else { return nil }
                value = value * 10 + Int(utf8[index] - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...monthDays[month - 1]).contains(day) else { return nil }
        // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Double((days - 11_323) * 86_400 + hour * 3600 + minute * 60 + second)
    }

    /// The bytes of a `<data>` element: strict base64 (``Base64``), white space allowed between
    /// characters.
    private mutating func data(_ tag: Tag) throws(PropertyListReader.Error) -> Data {
        guard !tag.empty else { return Data() }
        let start = position
        while position < bytes.count, bytes[position] != UInt8(ascii: "<") { position += 1 }
        let decoded: [UInt8]
        do { decoded = try Base64.decode(bytes[start..<position], skippingWhiteSpace: true) } catch {
            switch error {
            case .character(let at):
                let byte = bytes[at]
                let shown = byte >= 0x20 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "byte \(PropertyListReader.hex([byte]))"
                throw fail(at: at, "\(shown) in <data> is not a base64 character")
            case .misplacedPadding(let at):
                throw fail(at: at, "'=' in <data> where base64 has no padding")
            case .afterPadding(let at):
                throw fail(at: at, "base64 in <data> goes on after its padding '='")
            case .length(let characters, let last):
                throw fail(at: last, "base64 in <data> ends after \(characters) characters, not a multiple of 4 (the padding '=' is required)")
            case .nonCanonical(let padding, let last):
                throw fail(at: last, "base64 in <data> is not canonical: the unused bits before '\(padding == 2 ? "==" : "=")' are not zero")
            }
        }
        try endTag(of: tag)
        return Data(decoded)
    }

    // MARK: Markup

    /// The text content of `tag` and its end tag: characters, entities, CDATA sections and comments.
    private mutating func text(of tag: Tag) throws(PropertyListReader.Error) -> String {
        guard !tag.empty else { return "" }
        var text: [UInt8] = []
        while true {
            guard position < bytes.count else { throw endOfFile(inside: tag) }
            let byte = bytes[position]
            if byte == UInt8(ascii: "&") {
                text.append(contentsOf: try entity())
            } else if byte != UInt8(ascii: "<") {
                text.append(byte)
                position += 1
            } else if looking(at: "</") {
                break
            } else if looking(at: "<![CDATA[") {
                let open = position
                position += 9
                guard let end = find("]]>") else { throw fail(at: open, "a CDATA section that never ends (no ']]>')") }
                text.append(contentsOf: bytes[position..<end])
                position = end + 3
            } else if looking(at: "<!--") {
                try comment()
            } else {
                let inner = try element(inside: tag)
                throw fail(at: inner.offset, "<\(inner.name)> inside <\(tag.name)>, which holds only text")
            }
        }
        try endTag(of: tag)
        return String(decoding: text, as: UTF8.self)  // The file was checked to be UTF-8; entities are scalars.
    }

    /// The character of the entity or character reference at `position`, as UTF-8.
    private mutating func entity() throws(PropertyListReader.Error) -> [UInt8] {
        let open = position
        var end = position + 1
        while end < bytes.count, end - open <= 12, bytes[end] != UInt8(ascii: ";") { end += 1 }
        guard end < bytes.count, bytes[end] == UInt8(ascii: ";") else {
            throw fail(at: open, "'&' that starts no entity (write &amp; for an ampersand)")
        }
        let name = String(decoding: bytes[(open + 1)..<end], as: UTF8.self)
        position = end + 1
        switch name {
        case "lt": return [UInt8(ascii: "<")]
        case "gt": return [UInt8(ascii: ">")]
        case "amp": return [UInt8(ascii: "&")]
        case "quot": return [UInt8(ascii: "\"")]
        case "apos": return [UInt8(ascii: "'")]
        default: break
        }
        var code: UInt32?
        if name.hasPrefix("#x") || name.hasPrefix("#X") {
            code = name.count > 2 && name.dropFirst(2).allSatisfy(\.isHexDigit) ? UInt32(name.dropFirst(2), radix: 16) : nil
        } else if name.hasPrefix("#") {
            code = name.count > 1 && name.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) ? UInt32(name.dropFirst()) : nil
        } else {
            throw fail(at: open, "unknown entity '&\(PropertyListReader.describe(name));' (property lists use &lt; &gt; &amp; &quot; &apos; and &#…;)")
        }
        guard let code, let scalar = Unicode.Scalar(code) else {
            throw fail(at: open, "'&\(PropertyListReader.describe(name));' is not a Unicode scalar")
        }
        return Array(String(Character(scalar)).utf8)
    }

    /// The start tag at `position` (after white space and comments were skipped).
    private mutating func element(inside parent: Tag?) throws(PropertyListReader.Error) -> Tag {
        guard position < bytes.count else {
            if let parent { throw endOfFile(inside: parent) }
            throw fail(at: position, "the file ends before its <plist> element")
        }
        guard bytes[position] == UInt8(ascii: "<"), position + 1 < bytes.count, Self.isNameStart(bytes[position + 1]) else {
            if looking(at: "<![CDATA[") || bytes[position] != UInt8(ascii: "<") {
                throw fail(at: position, "\(describeHere()) where an element was expected\(parent.map { " in <\($0.name)>" } ?? "")")
            }
            throw fail(at: position, "'<' that starts no element")
        }
        let offset = position
        position += 1
        let nameStart = position
        while position < bytes.count, Self.isNameCharacter(bytes[position]) { position += 1 }
        let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
        var attributes = false
        while true {
            let spaced = skipSpace()
            guard position < bytes.count else { throw fail(at: offset, "the start tag <\(name) never ends") }
            if bytes[position] == UInt8(ascii: ">") {
                position += 1
                break
            }
            if looking(at: "/>") {
                position += 2
                return try checked(Tag(name: name, offset: offset, empty: true), attributes: attributes)
            }
            guard spaced, Self.isNameStart(bytes[position]) else {
                throw fail(at: position, "\(describeHere()) in the start tag <\(name)>")
            }
            while position < bytes.count, Self.isNameCharacter(bytes[position]) { position += 1 }
            skipSpace()
            guard looking(at: "=") else { throw fail(at: position, "an attribute of <\(name)> without '=' and a value") }
            position += 1
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") || bytes[position] == UInt8(ascii: "'") else {
                throw fail(at: position, "an attribute value of <\(name)> that is not quoted")
            }
            let quote = bytes[position]
            position += 1
            while position < bytes.count, bytes[position] != quote {
                guard bytes[position] != UInt8(ascii: "<") else { throw fail(at: position, "'<' in an attribute value of <\(name)>") }
                position += 1
            }
            guard position < bytes.count else { throw fail(at: offset, "the start tag <\(name) never ends") }
            position += 1
            attributes = true
        }
        return try checked(Tag(name: name, offset: offset, empty: false), attributes: attributes)
    }

    private func checked(_ tag: Tag, attributes: Bool) throws(PropertyListReader.Error) -> Tag {
        guard !attributes || tag.name == "plist" else {
            throw fail(at: tag.offset, "<\(tag.name)> has attributes; only <plist> takes any")
        }
        return tag
    }

    /// The end tag of `tag` at `position`.
    private mutating func endTag(of tag: Tag) throws(PropertyListReader.Error) {
        guard position < bytes.count else { throw endOfFile(inside: tag) }
        let offset = position
        guard looking(at: "</") else { throw fail(at: offset, "\(describeHere()) where </\(tag.name)> was expected") }
        position += 2
        let nameStart = position
        while position < bytes.count, Self.isNameCharacter(bytes[position]) { position += 1 }
        let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
        skipSpace()
        guard looking(at: ">") else { throw fail(at: offset, "the end tag </\(name) never ends") }
        position += 1
        guard name == tag.name else {
            throw fail(at: offset, "</\(name)> closes <\(tag.name)> (\(place(tag.offset)))")
        }
    }

    /// Skips the XML declaration (refusing an encoding other than UTF-8), comments, processing
    /// instructions, one document type declaration and white space before the document's element.
    private mutating func prolog() throws(PropertyListReader.Error) {
        if looking(at: "<?xml"), position + 5 < bytes.count, Self.isSpace(bytes[position + 5]) || bytes[position + 5] == UInt8(ascii: "?") {
            let open = position
            guard let end = find("?>") else { throw fail(at: open, "the XML declaration never ends (no '?>')") }
            let declaration = String(decoding: bytes[open..<end], as: UTF8.self)
            if let range = declaration.range(of: "encoding") {
                let rest = declaration[range.upperBound...].drop { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "'" || $0 == "\t" }
                let encoding = rest.prefix { $0 != "\"" && $0 != "'" && $0 != " " }
                guard ["utf-8", "utf8"].contains(encoding.lowercased()) else {
                    throw fail(at: open, "the XML declaration gives the encoding '\(PropertyListReader.describe(String(encoding)))'; only UTF-8 XML property lists are read")
                }
            }
            position = end + 2
        }
        var doctype = false
        while true {
            try skipMisc()
            guard looking(at: "<!DOCTYPE") else { return }
            guard !doctype else { throw fail(at: position, "a second <!DOCTYPE>") }
            doctype = true
            let open = position
            var brackets = 0
            var quote: UInt8?
            position += 9
            while true {
                guard position < bytes.count else { throw fail(at: open, "the <!DOCTYPE> never ends (no '>')") }
                let byte = bytes[position]
                position += 1
                if let open = quote {
                    if byte == open { quote = nil }
                } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    quote = byte
                } else if byte == UInt8(ascii: "[") {
                    brackets += 1
                } else if byte == UInt8(ascii: "]") {
                    brackets -= 1
                } else if byte == UInt8(ascii: ">"), brackets <= 0 {
                    break
                }
            }
        }
    }

    /// Skips white space, comments and processing instructions; throws at any other text.
    private mutating func skipMisc() throws(PropertyListReader.Error) {
        while true {
            skipSpace()
            if looking(at: "<!--") {
                try comment()
            } else if looking(at: "<?") {
                let open = position
                guard let end = find("?>") else { throw fail(at: open, "a processing instruction that never ends (no '?>')") }
                position = end + 2
            } else {
                return
            }
        }
    }

    private mutating func comment() throws(PropertyListReader.Error) {
        let open = position
        position += 4
        guard let end = find("-->") else { throw fail(at: open, "a comment that never ends (no '-->')") }
        position = end + 3
    }

    @discardableResult
    private mutating func skipSpace() -> Bool {
        let first = position
        while position < bytes.count, Self.isSpace(bytes[position]) { position += 1 }
        return position > first
    }

    private func looking(at text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard count <= bytes.count - position else { return false }
        return text.withUTF8Buffer { prefix in (0..<count).allSatisfy { bytes[position + $0] == prefix[$0] } }
    }

    /// Where `text` next occurs from `position`.
    private func find(_ text: StaticString) -> Int? {
        let pattern = text.withUTF8Buffer { Array($0) }
        guard bytes.count - position >= pattern.count else { return nil }
        var index = position
        while index <= bytes.count - pattern.count {
            if bytes[index] == pattern[0], (1..<pattern.count).allSatisfy({ bytes[index + $0] == pattern[$0] }) { return index }
            index += 1
        }
        return nil
    }

    private static func isNameStart(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || byte == UInt8(ascii: "_")
    }

    private static func isNameCharacter(_ byte: UInt8) -> Bool {
        isNameStart(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
    }

    // MARK: Errors

    /// Throws at the first byte that is not UTF-8.
    private func checkUTF8() throws(PropertyListReader.Error) {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes[start...].makeIterator()
        var offset = start
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let scalar): offset += scalar.count
            case .emptyInput: return
            case .error(let length):
                throw fail(at: offset, "byte \(PropertyListReader.hex([bytes[offset]])) is not valid UTF-8 (\(length) byte\(length == 1 ? "" : "s"))")
            }
        }
    }

    /// What is at `position`, for a message: "text 'abc'", "'<'", "the end of the file".
    private func describeHere() -> String {
        guard position < bytes.count else { return "the end of the file" }
        if bytes[position] == UInt8(ascii: "<") {
            let end = bytes[position...].prefix(40).firstIndex(of: UInt8(ascii: ">")).map { $0 + 1 } ?? min(position + 20, bytes.count)
            return "'\(PropertyListReader.describe(String(decoding: bytes[position..<end], as: UTF8.self)))'"
        }
        let line = bytes[position...].prefix(30).prefix { $0 != UInt8(ascii: "<") && $0 != 0x0A }
        return "text '\(PropertyListReader.describe(String(decoding: line, as: UTF8.self)))'"
    }

    private func endOfFile(inside tag: Tag) -> PropertyListReader.Error {
        fail(at: bytes.count, "the file ends inside <\(tag.name)> (\(place(tag.offset)))")
    }

    private func fail(at offset: Int, _ reason: String) -> PropertyListReader.Error {
        let (line, column) = lineAndColumn(offset)
        return Error(.xml(line: line, column: column), reason)
    }

    /// "opened at line 3, column 5", for a message naming a second place.
    private func place(_ offset: Int) -> String {
        let (line, column) = lineAndColumn(offset)
        return "opened at line \(line), column \(column)"
    }

    /// The 1-based line and column (in Unicode scalars) of `offset`.
    private func lineAndColumn(_ offset: Int) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        for byte in bytes[start..<min(offset, bytes.count)] {
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }
}
