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
    typealias Error = PropertyListReader.Error

    let bytes: [UInt8]
    /// Where the text starts, after a byte-order mark.
    let start: Int
    var position: Int
    private var state: PropertyListEntryState

    /// An element's start tag.
    struct Tag {
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
}
