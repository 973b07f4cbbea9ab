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
    enum Field: String, CaseIterable {
        case expiresAtMilliseconds, key, keyBase64, value, valueBase64

        /// The field named by these bytes, compared without making a string (the names' lengths
        /// differ, so one comparison decides).
        init?(_ name: ArraySlice<UInt8>) {
            let field: Field, spelling: StaticString
            switch name.count {
            case 21: (field, spelling) = (.expiresAtMilliseconds, "expiresAtMilliseconds")
            case 3: (field, spelling) = (.key, "key")
            case 9: (field, spelling) = (.keyBase64, "keyBase64")
            case 5: (field, spelling) = (.value, "value")
            case 11: (field, spelling) = (.valueBase64, "valueBase64")
            default: return nil
            }
            let matches = spelling.withUTF8Buffer { spelled in
                var index = name.startIndex
                for byte in spelled {
                    guard name[index] == byte else { return false }
                    index += 1
                }
                return true
            }
            guard matches else { return nil }
            self = field
        }
    }

    /// The entry `line` describes. `isFirstLine`: the line starts the input (a byte-order mark
    /// may start it).
    static func parse(_ line: ArraySlice<UInt8>, isFirstLine: Bool) throws(ExportLineProblem) -> ExportEntry {
        var entry = ExportEntry(key: [], value: [])
        var scratch = Scratch()
        try parse(line, isFirstLine: isFirstLine, into: &entry, scratch: &scratch)
        return entry
    }

    /// Buffers a parse uses besides the entry's, kept from line to line so that reading a line
    /// allocates nothing once they have grown: the text of a base64 field, and a field name
    /// with an escape in it.
    struct Scratch {
        fileprivate var keyBase64: [UInt8] = []
        fileprivate var valueBase64: [UInt8] = []
        fileprivate var other: [UInt8] = []
    }

    /// Reads `line` into `entry`, reusing its arrays' storage (what they held is replaced): the
    /// same entry and the same errors as ``parse(_:isFirstLine:)``. After a throw `entry` holds
    /// nothing to use.
    static func parse(_ line: ArraySlice<UInt8>, isFirstLine: Bool, into entry: inout ExportEntry, scratch: inout Scratch) throws(ExportLineProblem) {
        clear(&entry.key)
        clear(&entry.value)
        entry.expiresAtMilliseconds = nil
        clear(&scratch.keyBase64)
        clear(&scratch.valueBase64)
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
                let name = try cursor.memberName(scratch: &scratch.other)
                guard let field = Field(name) else {
                    throw cursor.problem("unknown field \"\(String(decoding: name, as: UTF8.self))\" (a line has \"key\" or \"keyBase64\", \"value\" or \"valueBase64\", and may have \"expiresAtMilliseconds\")")
                }
                if fields[field] != nil { throw cursor.problem("the field \"\(field.rawValue)\" appears twice", at: nameStart) }
                cursor.skipWhitespace()
                guard cursor.peek() == UInt8(ascii: ":") else { throw cursor.problem("not valid JSON: expected ':' after \"\(field.rawValue)\"", at: cursor.position) }
                cursor.position += 1
                cursor.skipWhitespace()
                // Each string goes straight to where it is kept: the entry's key or value, or the
                // base64 text decoded once the whole line has been read.
                switch field {
                case .key: fields[field] = try cursor.value(for: field, text: &entry.key)
                case .value: fields[field] = try cursor.value(for: field, text: &entry.value)
                case .keyBase64: fields[field] = try cursor.value(for: field, text: &scratch.keyBase64)
                case .valueBase64: fields[field] = try cursor.value(for: field, text: &scratch.valueBase64)
                case .expiresAtMilliseconds:
                    clear(&scratch.other)
                    fields[field] = try cursor.value(for: field, text: &scratch.other)
                }
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
        try bytes(fields, .key, .keyBase64, "key", text: scratch.keyBase64, into: &entry.key)
        try bytes(fields, .value, .valueBase64, "value", text: scratch.valueBase64, into: &entry.value)
        entry.expiresAtMilliseconds = try expiry()
    }

    /// Empties `bytes`, keeping their storage (and sparing the call when they are empty already).
    @inline(__always)
    private static func clear(_ bytes: inout [UInt8]) {
        if !bytes.isEmpty { bytes.removeAll(keepingCapacity: true) }
    }

    /// Checks that exactly one of a `name` / `nameBase64` pair is present, as a string; for the
    /// base64 one, decodes its `text` into `bytes` (which then hold nothing else: a string of the
    /// plain field went there, and it is absent).
    private static func bytes(
        _ fields: Fields, _ plain: Field, _ base64: Field, _ name: String, text: [UInt8], into bytes: inout [UInt8]
    ) throws(ExportLineProblem) {
        func isString(_ field: Field) throws(ExportLineProblem) -> Bool {
            switch fields[field] {
            case nil: return false
            case .string?: return true
            case .integer?, .other?: throw ExportLineProblem(reason: "\"\(field.rawValue)\" is not a string")
            }
        }
        switch (try isString(plain), try isString(base64)) {
        case (true, false):
            return
        case (false, true):
            do { try Base64.decode(text[...], appendingTo: &bytes) } catch {
                throw ExportLineProblem(reason: "\"\(name)Base64\" is not valid base64: \(Self.describe(error))")
            }
        case (false, false):
            throw ExportLineProblem(reason: "no \(name): give \"\(name)\" (UTF-8 text) or \"\(name)Base64\"")
        case (true, true):
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

    /// What a field held: a string (its bytes went where the field's text is kept), a
    /// non-negative integer that fits 64 bits, or any other JSON value (checked for syntax, then
    /// refused by the field's rules).
    enum FieldValue {
        case string
        case integer(UInt64)
        case other
    }
}
