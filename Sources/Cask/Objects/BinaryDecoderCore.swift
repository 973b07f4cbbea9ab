import Foundation

/// The state of one binary decoding: the input, its name table, the coding path.
///
/// Nothing is decoded ahead of need: a keyed container finds a field by walking its fields (each
/// value carries its length, so skipping one is O(1)), starting where the previous lookup in the
/// same container ended — in the common case, fields are asked for in the order they were written
/// and every lookup is one step. Not thread-safe: one decoding at a time.
final class BinaryDecoderCore {
    /// A name of the name table: where its UTF-8 bytes are in the input.
    struct Name {
        var start: Int
        var count: Int
    }

    /// Where the last lookup in a container ended, by container nesting level.
    struct Hint {
        var container = -1
        var position = 0
    }

    @exclusivity(unchecked) var reader = ObjectReader()
    @exclusivity(unchecked) var names: [Name] = []
    @exclusivity(unchecked) var hints: [Hint] = []
    /// Name → index, built on first need for records with large name tables (dictionaries).
    var nameIndex: [String: Int]?
    var path: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    /// Tables up to this size are searched linearly.
    static let linearNameSearchLimit = 16

    // MARK: Whole values

    func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
        reset()
        reader.bytes = bytes
        defer { reader.bytes = UnsafeRawBufferPointer(start: nil, count: 0) }  // a decoder kept past this call reads nothing
        let root: ObjectHeader
        do throws(ObjectFault) {
            root = try readFrame()
        } catch {
            throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: error.message))
        }
        return try decodeValue(T.self, root, pathCount: 0, extra: [], key: nil)
    }

    /// Checks the version byte and reads the name table; returns the root value's header.
    private func readFrame() throws(ObjectFault) -> ObjectHeader {
        let bytes = reader.bytes
        guard bytes.count > 0 else { throw .corrupt("no bytes: an encoded value has at least a version byte, a value and a name table") }
        guard bytes[0] == ObjectFormat.version else {
            throw .corrupt("the first byte is 0x\(String(bytes[0], radix: 16)), not the version 1 of Cask's binary coding (is it JSON or a property list?)")
        }
        let root = try reader.header(at: 1, limit: bytes.count)
        var position = root.end
        let count = try reader.varint(at: &position, limit: bytes.count)
        guard count <= UInt64(bytes.count - position) else { throw .corrupt("the name table claims \(count) names in \(bytes.count - position) bytes") }
        names.reserveCapacity(Int(count))
        for _ in 0..<count {
            let length = try reader.varint(at: &position, limit: bytes.count)
            guard length <= UInt64(bytes.count - position) else { throw .corrupt("a name of \(length) bytes runs past the end") }
            names.append(Name(start: position, count: Int(length)))
            position += Int(length)
        }
        guard position == bytes.count else { throw .corrupt("\(bytes.count - position) bytes follow the name table") }
        return root
    }

    func reset() {
        names.removeAll(keepingCapacity: names.count < 1024)
        hints.removeAll(keepingCapacity: true)
        path.removeAll(keepingCapacity: true)
        nameIndex = nil
    }

    // MARK: Values

    /// Decodes the value whose header is `header`: the types with a representation of their own
    /// directly, anything else by `T(from:)` with `key` (and `extra`) pushed on the coding path.
    func decodeValue<T: Decodable>(_ type: T.Type, _ header: ObjectHeader, pathCount: Int, extra: [any CodingKey], key: (any CodingKey)?) throws -> T {
        do throws(ObjectFault) {
            if let value = try readPrimitive(T.self, header) { return value }
        } catch {
            throw decodingError(error, type: T.self, codingPath: codingPath(pathCount, extra, key))
        }
        let depth = path.count
        guard depth < ObjectFormat.maxDepth else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: codingPath(pathCount, extra, key), debugDescription: "values are nested more than \(ObjectFormat.maxDepth) deep"))
        }
        if !extra.isEmpty { path.append(contentsOf: extra) }
        if let key { path.append(key) }
        defer { path.removeSubrange(depth...) }
        return try T(from: BinaryDecoderSlot(core: self, offset: header.offset, pathCount: path.count))
    }

    /// The types with a representation of their own; nil for anything else.
    @inline(__always)
    func readPrimitive<T: Decodable>(_ type: T.Type, _ header: ObjectHeader) throws(ObjectFault) -> T? {
        // Safe (every unsafeBitCast below): T is exactly the type of the value cast.
        if T.self == String.self { return unsafeBitCast(try reader.string(header), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try reader.integer(header, as: Int.self), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try reader.double(header), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try reader.bool(header), to: T.self) }
        return try readOtherPrimitive(T.self, header)
    }

    func readOtherPrimitive<T: Decodable>(_ type: T.Type, _ header: ObjectHeader) throws(ObjectFault) -> T? {
        // Safe (every unsafeBitCast below): T is exactly the type of the value cast.
        if T.self == Int64.self { return unsafeBitCast(try reader.integer(header, as: Int64.self), to: T.self) }
        if T.self == UInt64.self { return unsafeBitCast(try reader.integer(header, as: UInt64.self), to: T.self) }
        if T.self == Int32.self { return unsafeBitCast(try reader.integer(header, as: Int32.self), to: T.self) }
        if T.self == UInt32.self { return unsafeBitCast(try reader.integer(header, as: UInt32.self), to: T.self) }
        if T.self == Int16.self { return unsafeBitCast(try reader.integer(header, as: Int16.self), to: T.self) }
        if T.self == UInt16.self { return unsafeBitCast(try reader.integer(header, as: UInt16.self), to: T.self) }
        if T.self == Int8.self { return unsafeBitCast(try reader.integer(header, as: Int8.self), to: T.self) }
        if T.self == UInt8.self { return unsafeBitCast(try reader.integer(header, as: UInt8.self), to: T.self) }
        if T.self == UInt.self { return unsafeBitCast(try reader.integer(header, as: UInt.self), to: T.self) }
        if T.self == Float.self { return unsafeBitCast(try reader.float(header), to: T.self) }
        if T.self == Date.self {
            return unsafeBitCast(Date(timeIntervalSinceReferenceDate: try reader.double(header)), to: T.self)
        }
        if T.self == Data.self, header.major == .bytes { return unsafeBitCast(Data(reader.content(of: header)), to: T.self) }
        if T.self == [UInt8].self, header.major == .bytes { return unsafeBitCast(Array(reader.content(of: header)), to: T.self) }
        if T.self == UUID.self { return unsafeBitCast(try uuid(header), to: T.self) }
        if T.self == URL.self { return unsafeBitCast(try url(header), to: T.self) }
        if T.self == Decimal.self { return unsafeBitCast(try decimal(header), to: T.self) }
        if T.self == Int128.self { return unsafeBitCast(try reader.integer(header, as: Int128.self), to: T.self) }
        if T.self == UInt128.self { return unsafeBitCast(try reader.integer(header, as: UInt128.self), to: T.self) }
        return nil
    }

    private func uuid(_ header: ObjectHeader) throws(ObjectFault) -> UUID {
        if header.tag == ObjectFormat.Simple.uuid.rawValue { return reader.uuid(header) }
        if header.major == .string {
            let text = try reader.string(header)
            if let uuid = UUID(uuidString: text) { return uuid }
            throw .corrupt("\"\(text)\" is not a UUID")
        }
        throw reader.mismatch("a UUID", header)
    }

    /// A Decimal is its decimal string (Foundation's own keyed form traps on some bad input); a
    /// number written by a model where the field was an integer or a Double reads too.
    private func decimal(_ header: ObjectHeader) throws(ObjectFault) -> Decimal {
        switch header.major {
        case .string:
            let text = try reader.string(header)
            guard let decimal = Decimal(string: text, locale: nil) else { throw .corrupt("\"\(text)\" is not a decimal number") }
            return decimal
        case .unsigned:
            return Decimal(header.number)
        case .negative:
            return try Decimal(reader.integer(header, as: Int64.self))
        default:
            return Decimal(try reader.double(header))
        }
    }

    private func url(_ header: ObjectHeader) throws(ObjectFault) -> URL {
        guard header.major == .string else { throw reader.mismatch("a URL string", header) }
        let text = try reader.string(header)
        guard let url = URL(string: text) else { throw .corrupt("\"\(text)\" is not a valid URL") }
        return url
    }

    // MARK: Names

    /// The index of `name` in the name table, if it is there.
    func index(ofName name: String) -> Int? {
        if names.count <= Self.linearNameSearchLimit {
            for (index, entry) in names.enumerated() where reader.bytes(at: entry.start, count: entry.count, equal: name) {
                return index
            }
            return nil
        }
        if nameIndex == nil {
            var table: [String: Int] = [:]
            table.reserveCapacity(names.count)
            for (index, entry) in names.enumerated() {
                let text = String(decoding: UnsafeRawBufferPointer(rebasing: reader.bytes[entry.start..<(entry.start + entry.count)]), as: UTF8.self)
                if table[text] == nil { table[text] = index }
            }
            nameIndex = table
        }
        return nameIndex?[name]
    }

    /// The name with field id `id` (an even id), as a String.
    func name(ofFieldID id: UInt64) throws(ObjectFault) -> String {
        let index = id >> 1
        guard index < UInt64(names.count) else { throw .corrupt("field id \(id) refers to name \(index), but the table has \(names.count)") }
        let entry = names[Int(index)]
        guard let text = String(validating: UnsafeRawBufferPointer(rebasing: reader.bytes[entry.start..<(entry.start + entry.count)]), as: UTF8.self) else {
            throw .corrupt("name \(index) of the name table is not valid UTF-8")
        }
        return text
    }

    /// Whether field id `id` is the name `name` (compared byte for byte).
    @inline(__always)
    func fieldID(_ id: UInt64, isName name: String) -> Bool {
        guard id & 1 == 0, id >> 1 < UInt64(names.count) else { return false }
        let entry = names[Int(id >> 1)]
        return reader.bytes(at: entry.start, count: entry.count, equal: name)
    }

    // MARK: Hints

    @inline(__always)
    func hint(level: Int, container: Int) -> Int? {
        guard level < hints.count, hints[level].container == container else { return nil }
        return hints[level].position
    }

    @inline(__always)
    func setHint(level: Int, container: Int, position: Int) {
        guard level < ObjectFormat.maxDepth * 2 else { return }
        while hints.count <= level { hints.append(Hint()) }
        hints[level] = Hint(container: container, position: position)
    }

    // MARK: Errors

    func codingPath(_ pathCount: Int, _ extra: [any CodingKey], _ key: (any CodingKey)?) -> [any CodingKey] {
        var codingPath = Array(path.prefix(pathCount))
        codingPath.append(contentsOf: extra)
        if let key { codingPath.append(key) }
        return codingPath
    }

    func decodingError(_ fault: ObjectFault, type: Any.Type, codingPath: [any CodingKey]) -> DecodingError {
        let context = DecodingError.Context(codingPath: codingPath, debugDescription: fault.message)
        return switch fault.kind {
        case .corrupt: .dataCorrupted(context)
        case .typeMismatch: .typeMismatch(type, context)
        case .null: .valueNotFound(type, context)
        }
    }
}
