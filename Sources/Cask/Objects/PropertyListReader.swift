/// A strict reader of property-list files, XML (`<plist version="1.0">`, UTF-8) and binary
/// (`bplist00`), written for `cask import-defaults`: it parses the bytes itself, with no Foundation
/// parsing, so that what it accepts is exactly what a correct writer produces.
///
/// ```swift
/// for entry in try PropertyListReader.readDictionary(bytes) {
///     switch entry.value {
///     case .success(let value):
///         let stored = (try? value.typedValue()) ?? value   // its Swift type, or itself when it mixes kinds
///         try store.set(stored, forKey: entry.name)
///     case .failure(let reason): print("skipped \(entry.name): \(reason)")
///     }
/// }
/// ```
///
/// Guarantees:
/// 1. Malformed input — anything a correct writer never produces: a truncated file, an offset or a
///    length outside the file, an invalid marker or element, a set, a keyed-archiver UID, a
///    reference cycle, a dictionary key given twice, invalid base64, invalid UTF-8 or UTF-16 —
///    throws ``Error``, naming the place (object number and byte offset in a binary list; line and
///    column in an XML one) and the cause. Nothing of such a file is returned.
/// 2. A top-level entry the reader can parse but a ``PropertyListValue`` cannot hold — an integer
///    outside `Int`'s range, containers nested more than ``maxNesting`` deep — is returned as a
///    `.failure` naming the value and where it is inside the entry; the other entries are unaffected.
/// 3. Bounded work and memory: no allocation is sized by a length field before that length is
///    checked against the bytes that are there; recursion stops at ``maxDocumentDepth``; a binary
///    list whose shared objects would expand to more than ``valueLimit(forFileSize:)`` values is
///    refused. Time and memory are linear in the input's size.
public enum PropertyListReader {
    /// One top-level entry: its value, or why it cannot be a ``PropertyListValue``.
    public typealias Entry = (name: String, value: Result<PropertyListValue, PropertyListValue.ConversionError>)

    /// The deepest nesting of arrays and dictionaries an entry's value may have (the entry's value
    /// itself counts as one). Cask's binary object coder holds `ObjectFormat.maxDepth` (256) nested
    /// containers, and each property-list container takes two of them (the one-field wrapper of
    /// ``PropertyListValue`` and the array or dictionary) plus one for the innermost value: 127.
    public static let maxNesting = (ObjectFormat.maxDepth - 1) / 2

    /// The deepest nesting a file may have at all, counting its top-level dictionary. A file nested
    /// deeper is refused as a whole (its entries beyond ``maxNesting`` but within this are skipped).
    public static let maxDocumentDepth = 512

    /// The most values a file of `size` bytes may expand to: one per byte, or 65,536 for a smaller
    /// file. A tree without shared containers never reaches it (every value but the top one costs at
    /// least a one-byte reference or a four-byte element); a binary list that references the same
    /// arrays over and over, expanding exponentially, does.
    public static func valueLimit(forFileSize size: Int) -> Int { max(size, 1 << 16) }

    /// Why a file is not a property list this reader accepts.
    public struct Error: Swift.Error, Equatable, Sendable, CustomStringConvertible {
        /// Where in the file the problem is.
        public enum Place: Equatable, Sendable {
            /// The file as a whole (its format, its first bytes).
            case file
            /// A binary list: the object (when the problem is in one) and the byte offset.
            case binary(object: Int?, offset: Int)
            /// An XML list: the 1-based line and column (in Unicode scalars).
            case xml(line: Int, column: Int)
        }

        public var place: Place
        public var reason: String

        public init(_ place: Place, _ reason: String) {
            self.place = place
            self.reason = reason
        }

        public var description: String {
            switch place {
            case .file: reason
            case .binary(let object?, let offset): "binary property list, object \(object) at byte \(offset): \(reason)"
            case .binary(nil, let offset): "binary property list, byte \(offset): \(reason)"
            case .xml(let line, let column): "XML property list, line \(line), column \(column): \(reason)"
            }
        }
    }

    /// The entries of the top-level dictionary of a property-list file, in the file's order.
    ///
    /// Throws ``Error`` when the bytes are not an XML or binary property list, when it is malformed
    /// anywhere (see the type's guarantees), or when its top level is not a dictionary. An OpenStep
    /// (text) list, JSON, or XML in another encoding than UTF-8 is refused with a message saying so.
    /// Complexity: O(n) time and memory in the size of the file.
    public static func readDictionary(_ bytes: [UInt8]) throws(Error) -> [Entry] {
        if bytes.starts(with: Array("bplist".utf8)) {
            guard bytes.starts(with: Array("bplist00".utf8)) else {
                let version = String(decoding: bytes.dropFirst(6).prefix(2), as: UTF8.self)
                throw Error(.file, "a binary property list of version '\(describe(version))'; only version 00 (bplist00) is read")
            }
            var parser = try BinaryPropertyListParser(bytes)
            return try parser.readDictionary()
        }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0x3C, 0]) || bytes.starts(with: [0, 0x3C]) || bytes.starts(with: [0, 0, 0xFE, 0xFF]) {
            throw Error(.file, "the file is UTF-16 or UTF-32 text (it starts with bytes \(hex(bytes.prefix(2)))); only UTF-8 XML property lists are read")
        }
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        guard let first = bytes[start...].first(where: { !XMLPropertyListParser.isSpace($0) }) else {
            throw Error(.file, bytes.isEmpty ? "the file is empty" : "the file holds only white space")
        }
        switch first {
        case UInt8(ascii: "<"):
            var parser = XMLPropertyListParser(bytes, start: start)
            return try parser.readDictionary()
        case UInt8(ascii: "{"), UInt8(ascii: "("), UInt8(ascii: "\""), UInt8(ascii: "/"):
            throw Error(.file, "it starts with '\(Character(Unicode.Scalar(first)))': an OpenStep (text) property list or JSON; only XML and binary property lists are read")
        default:
            throw Error(.file, "it starts with byte \(hex([first])), not '<' (XML) nor 'bplist00' (binary): not a property list")
        }
    }

    // MARK: Shared by both formats

    /// `0xAB 0xCD` for a message.
    static func hex<S: Sequence<UInt8>>(_ bytes: S) -> String {
        bytes.map { "0x" + String($0, radix: 16, uppercase: true).leftPadded(to: 2) }.joined(separator: " ")
    }

    /// A string for a message: control characters escaped, cut after 60 characters.
    static func describe(_ text: String) -> String {
        let escaped = text.unicodeScalars.prefix(61).map { $0.value < 0x20 || $0.value == 0x7F ? $0.escaped(asASCII: true) : String($0) }
        return escaped.count > 60 ? escaped.prefix(60).joined() + "…" : escaped.joined()
    }

    /// The reason an integer does not fit a ``PropertyListValue``.
    static func integerOutOfRange(_ text: String) -> String {
        "integer \(text) is outside Int's range (\(Int.min) ... \(Int.max))"
    }

    /// The reason an entry nests deeper than the object coder holds.
    static var nestedTooDeep: String {
        "containers are nested more than \(maxNesting) deep, more than the object coder can store"
    }
}

/// What both parsers track while they build one top-level entry: where they are inside it, the
/// first reason to skip it, and how many values the file has expanded to so far.
struct PropertyListEntryState {
    enum Component {
        case index(Int)
        case key(String)
    }

    let valueLimit: Int
    private(set) var values = 0
    var path: [Component] = []
    private(set) var skip: PropertyListValue.ConversionError?

    init(fileSize: Int) {
        valueLimit = PropertyListReader.valueLimit(forFileSize: fileSize)
    }

    /// Counts one more value; false when the file expands to more than ``valueLimit``.
    mutating func countValue() -> Bool {
        values += 1
        return values <= valueLimit
    }

    var tooManyValues: String {
        "the file expands to more than \(valueLimit) values (shared objects referenced over and over); refused"
    }

    /// Records why the entry cannot be stored, at the current path, unless an earlier reason was.
    mutating func skipEntry(_ reason: String) {
        guard skip == nil else { return }
        var text = ""
        for component in path {
            switch component {
            case .index(let index): text += "[\(index)]"
            case .key(let key): text += text.isEmpty ? key : ".\(key)"
            }
        }
        skip = PropertyListValue.ConversionError(path: text, reason: reason)
    }

    /// Checks the nesting of a container opened at `depth` (the entry's value is at 1, the file's
    /// top-level dictionary at 0); false when the file is nested deeper than the reader goes.
    mutating func enterContainer(depth: Int) -> Bool {
        if depth > PropertyListReader.maxNesting, skip == nil {
            let path = self.path
            self.path = []
            skipEntry(PropertyListReader.nestedTooDeep)
            self.path = path
        }
        return depth < PropertyListReader.maxDocumentDepth
    }

    var documentTooDeep: String {
        "containers are nested more than \(PropertyListReader.maxDocumentDepth) deep, more than this reader follows"
    }

    /// Starts the next top-level entry.
    mutating func startEntry(_ name: String) {
        path = []
        skip = nil
    }

    /// The entry just built.
    func entry(_ name: String, _ value: PropertyListValue) -> PropertyListReader.Entry {
        (name, skip.map { .failure($0) } ?? .success(value))
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
