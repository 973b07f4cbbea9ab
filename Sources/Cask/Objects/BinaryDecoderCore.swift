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

    struct End {
        var end: Int
        var keyed: Bool
    }

    /// Where the last lookup in a container ended, by container nesting level.
    struct Hint {
        var container = -1
        var position = 0
    }

    // The properties are touched by this decoding only, never from two threads and never with an
    // access held across a call out to a model's `init(from:)`; dynamic exclusivity checks would
    // only cost time.
    @exclusivity(unchecked) var reader = ObjectReader()
    @exclusivity(unchecked) var names: [Name] = []
    @exclusivity(unchecked) var hints: [Hint] = []
    /// The open containers while validating.
    @exclusivity(unchecked) var ends: [End] = []
    /// Name → index, built on first need for records with large name tables (dictionaries).
    @exclusivity(unchecked) var nameIndex: [String: Int]?
    @exclusivity(unchecked) var path: [any CodingKey] = []
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
            guard reader.isValidUTF8(at: position, count: Int(length)) else { throw .corrupt("name \(names.count) of the name table is not valid UTF-8") }
            names.append(Name(start: position, count: Int(length)))
            position += Int(length)
        }
        guard position == bytes.count else { throw .corrupt("\(bytes.count - position) bytes follow the name table") }
        try validate(root)
        return root
    }

    /// Checks the structure of the whole value before anything is decoded: every tag, length and
    /// field id, UTF-8 of every string, nesting within the limit. So damage is found wherever it is —
    /// also in fields the model does not read — and the containers can trust the structure.
    /// One pass, no recursion (an explicit stack of container ends).
    private func validate(_ root: ObjectHeader) throws(ObjectFault) {
        guard root.major == .array || root.major == .object else { return try validateLeaf(root) }
        ends.removeAll(keepingCapacity: true)
        ends.append(End(end: root.end, keyed: root.major == .object))
        var position = root.contentStart
        while let container = ends.last {
            if position == container.end {
                ends.removeLast()
                continue
            }
            if container.keyed {
                let id = try reader.varint(at: &position, limit: container.end)
                if id & 1 == 0, id >> 1 >= UInt64(names.count) {
                    throw .corrupt("field id \(id) refers to name \(id >> 1), but the table has \(names.count)")
                }
            }
            let value = try reader.header(at: position, limit: container.end)
            if (value.major == .array || value.major == .object) && value.end > value.contentStart {
                guard ends.count < ObjectFormat.maxDepth else {
                    throw .corrupt("containers are nested more than \(ObjectFormat.maxDepth) deep")
                }
                ends.append(End(end: value.end, keyed: value.major == .object))
                position = value.contentStart
            } else {
                try validateLeaf(value)
                position = value.end
            }
        }
    }

    @inline(__always)
    private func validateLeaf(_ value: ObjectHeader) throws(ObjectFault) {
        if value.major == .string, !reader.isValidUTF8(at: value.contentStart, count: value.end - value.contentStart) {
            throw .corrupt("a string at offset \(value.offset) is not valid UTF-8")
        }
        // 128-bit integers only for what 64 bits cannot hold: one encoding per integer.
        if value.tag == ObjectFormat.Simple.bigUnsigned.rawValue || value.tag == ObjectFormat.Simple.bigNegative.rawValue {
            let limit = value.tag == ObjectFormat.Simple.bigUnsigned.rawValue ? UInt128(UInt64.max) : UInt128(Int64.max)
            guard reader.littleEndian(at: value.contentStart, as: UInt128.self) > limit else {
                throw .corrupt("a 128-bit integer at offset \(value.offset) fits in 64 bits")
            }
        }
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
        if let direct = DirectType(T.self, header) {
            do { return try readDirect(direct, T.self, header) } catch {
                var path = codingPath(pathCount, extra, key)
                if let index = error.index { path.append(ObjectIndexKey(index)) }
                throw decodingError(error, type: T.self, codingPath: path)
            }
        }
        let depth = path.count
        guard depth < ObjectFormat.maxDepth else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: codingPath(pathCount, extra, key), debugDescription: "values are nested more than \(ObjectFormat.maxDepth) deep"))
        }
        if !extra.isEmpty { path.append(contentsOf: extra) }
        if let key { path.append(key) }
        defer {
            if path.count == depth + 1 { path.removeLast() } else if path.count > depth { path.removeSubrange(depth...) }
        }
        // An array of any other Decodable: its elements read here, into an array sized once,
        // rather than through `Array.init(from:)` and an unkeyed container (an existential box and
        // a reallocation per doubling). An array is one word: the size test spares other types
        // the conformance lookup.
        if header.major == .array, MemoryLayout<T>.size == MemoryLayout<[Int]>.size,
           let array = T.self as? any ObjectDecodableArray.Type {
            return try decodeArray(array, as: T.self, header)
        }
        return try T(from: BinaryDecoderSlot(core: self, offset: header.offset, pathCount: path.count))
    }

    /// `A` is `T` (an array type found by ``decodeValue(_:_:pathCount:extra:key:)``).
    private func decodeArray<A: ObjectDecodableArray, T>(_ array: A.Type, as type: T.Type, _ header: ObjectHeader) throws -> T {
        unsafeBitCast(try A.decodeElements(self, header), to: T.self)  // Safe: A is T, cast by the caller.
    }

    /// The elements of the unkeyed container `header` as `Element`s, each under its index on the
    /// coding path (which already ends with the array's key), as `Array.init(from:)` reads them.
    func decodeElements<Element: Decodable>(_ header: ObjectHeader, as type: Element.Type) throws -> [Element] {
        var count = 0
        var position = header.contentStart
        do throws(ObjectFault) {
            while position < header.end {
                position = try reader.header(at: position, limit: header.end).end
                count += 1
            }
        } catch {
            throw decodingError(error, type: [Element].self, codingPath: path)
        }
        var elements: [Element] = []
        elements.reserveCapacity(count)  // at most one element per byte of the input
        let pathCount = path.count
        position = header.contentStart
        while position < header.end {
            let element: ObjectHeader
            do throws(ObjectFault) { element = try reader.header(at: position, limit: header.end) } catch {
                throw decodingError(error, type: Element.self, codingPath: codingPath(pathCount, [], ObjectIndexKey(elements.count)))
            }
            elements.append(try decodeValue(Element.self, element, pathCount: pathCount, extra: [], key: ObjectIndexKey(elements.count)))
            position = element.end
        }
        return elements
    }

    /// The types read straight from a value rather than through `init(from:)`. (An enum, not an
    /// optional `T`: in unspecialized code an `Optional<T>` costs a metadata lookup per value.)
    enum DirectType {
        case string, int, double, bool, int64, uint64, int32, uint32, int16, uint16, int8, uint8, uint, float
        case date, data, bytes, uuid, url, decimal, int128, uint128
        case strings, ints, doubles

        @inline(__always)
        init?(_ type: Any.Type, _ header: ObjectHeader) {
            if type == String.self { self = .string }
            else if type == Int.self { self = .int }
            else if type == Double.self { self = .double }
            else if type == Bool.self { self = .bool }
            else { self.init(other: type, header) }
        }

        init?(other type: Any.Type, _ header: ObjectHeader) {
            if type == Int64.self { self = .int64 }
            else if type == UInt64.self { self = .uint64 }
            else if type == Int32.self { self = .int32 }
            else if type == UInt32.self { self = .uint32 }
            else if type == Int16.self { self = .int16 }
            else if type == UInt16.self { self = .uint16 }
            else if type == Int8.self { self = .int8 }
            else if type == UInt8.self { self = .uint8 }
            else if type == UInt.self { self = .uint }
            else if type == Float.self { self = .float }
            else if type == Date.self { self = .date }
            // Bytes only: an unkeyed container of integers goes through init(from:).
            else if type == Data.self, header.major == .bytes { self = .data }
            else if type == [UInt8].self, header.major == .bytes { self = .bytes }
            else if type == UUID.self { self = .uuid }
            else if type == URL.self { self = .url }
            else if type == Decimal.self { self = .decimal }
            else if type == Int128.self { self = .int128 }
            else if type == UInt128.self { self = .uint128 }
            // Common arrays, read as Array.init(from:) would read them, minus the protocol calls.
            else if type == [String].self, header.major == .array { self = .strings }
            else if type == [Int].self, header.major == .array { self = .ints }
            else if type == [Double].self, header.major == .array { self = .doubles }
            else { return nil }
        }
    }

    /// Reads a value of a direct type; `T` is the type `direct` names.
    @inline(__always)
    func readDirect<T>(_ direct: DirectType, _ type: T.Type, _ header: ObjectHeader) throws(ObjectFault) -> T {
        // Safe (every unsafeBitCast below): `direct` was made from T, so T is exactly the type cast to.
        switch direct {
        case .string: return unsafeBitCast(try reader.string(header), to: T.self)
        case .int: return unsafeBitCast(try reader.integer(header, as: Int.self), to: T.self)
        case .double: return unsafeBitCast(try reader.double(header), to: T.self)
        case .bool: return unsafeBitCast(try reader.bool(header), to: T.self)
        case .int64: return unsafeBitCast(try reader.integer(header, as: Int64.self), to: T.self)
        case .uint64: return unsafeBitCast(try reader.integer(header, as: UInt64.self), to: T.self)
        case .int32: return unsafeBitCast(try reader.integer(header, as: Int32.self), to: T.self)
        case .uint32: return unsafeBitCast(try reader.integer(header, as: UInt32.self), to: T.self)
        case .int16: return unsafeBitCast(try reader.integer(header, as: Int16.self), to: T.self)
        case .uint16: return unsafeBitCast(try reader.integer(header, as: UInt16.self), to: T.self)
        case .int8: return unsafeBitCast(try reader.integer(header, as: Int8.self), to: T.self)
        case .uint8: return unsafeBitCast(try reader.integer(header, as: UInt8.self), to: T.self)
        case .uint: return unsafeBitCast(try reader.integer(header, as: UInt.self), to: T.self)
        case .float: return unsafeBitCast(try reader.float(header), to: T.self)
        case .date: return unsafeBitCast(Date(timeIntervalSinceReferenceDate: try reader.double(header)), to: T.self)
        case .data: return unsafeBitCast(Data(reader.content(of: header)), to: T.self)
        case .bytes: return unsafeBitCast(Array(reader.content(of: header)), to: T.self)
        case .uuid: return unsafeBitCast(try uuid(header), to: T.self)
        case .url: return unsafeBitCast(try url(header), to: T.self)
        case .decimal: return unsafeBitCast(try decimal(header), to: T.self)
        case .int128: return unsafeBitCast(try reader.integer(header, as: Int128.self), to: T.self)
        case .uint128: return unsafeBitCast(try reader.integer(header, as: UInt128.self), to: T.self)
        case .strings: return unsafeBitCast(try readArray(header, String.self), to: T.self)
        case .ints: return unsafeBitCast(try readArray(header, Int.self), to: T.self)
        case .doubles: return unsafeBitCast(try readArray(header, Double.self), to: T.self)
        }
    }

    /// The elements of an unkeyed container, counted first so that the array is allocated once.
    /// A fault names the element (`ObjectFault.index`).
    func readArray<Element: ObjectPrimitive>(_ header: ObjectHeader, _ type: Element.Type) throws(ObjectFault) -> [Element] {
        var count = 0
        var position = header.contentStart
        while position < header.end {
            position = try reader.header(at: position, limit: header.end).end
            count += 1
        }
        var elements: [Element] = []
        elements.reserveCapacity(count)  // at most one element per byte of the input
        position = header.contentStart
        while position < header.end {
            let element = try reader.header(at: position, limit: header.end)
            do { elements.append(try Element.read(reader, element)) } catch {
                var fault = error
                fault.index = elements.count
                throw fault
            }
            position = element.end
        }
        return elements
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

    /// The header of the container at `offset` (-1: an absent value), which must be of `major`.
    func containerHeader(at offset: Int, expecting major: ObjectFormat.Major, _ type: Any.Type, codingPath: @autoclosure () -> [any CodingKey]) throws -> ObjectHeader {
        guard offset >= 0 else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: codingPath(), debugDescription: "no value"))
        }
        do throws(ObjectFault) {
            let header = try reader.header(at: offset, limit: reader.bytes.count)
            guard header.major == major else {
                throw reader.mismatch(major == .object ? "a keyed container" : "an unkeyed container", header)
            }
            return header
        } catch {
            throw decodingError(error, type: type, codingPath: codingPath())
        }
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
        // Valid UTF-8: checked with the name table.
        return String(decoding: UnsafeRawBufferPointer(rebasing: reader.bytes[entry.start..<(entry.start + entry.count)]), as: UTF8.self)
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

/// Arrays whose elements the decoder reads itself (``BinaryDecoderCore/decodeElements(_:as:)``).
protocol ObjectDecodableArray {
    static func decodeElements(_ core: BinaryDecoderCore, _ header: ObjectHeader) throws -> Self
}

extension Array: ObjectDecodableArray where Element: Decodable {
    static func decodeElements(_ core: BinaryDecoderCore, _ header: ObjectHeader) throws -> [Element] {
        try core.decodeElements(header, as: Element.self)
    }
}
