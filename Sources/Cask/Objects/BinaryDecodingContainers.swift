/// The `Decoder` a type's `init(from:)` receives: one value of the input.
struct BinaryDecoderSlot: Decoder {
    let core: BinaryDecoderCore
    /// The value's tag; -1 for an absent value (`superDecoder(forKey:)` of a missing key), which
    /// reads as null.
    let offset: Int
    let pathCount: Int

    var codingPath: [any CodingKey] { Array(core.path.prefix(pathCount)) }
    var userInfo: [CodingUserInfoKey: Any] { core.userInfo }

    private func header(expecting major: ObjectFormat.Major, _ type: Any.Type) throws -> ObjectHeader {
        try core.containerHeader(at: offset, expecting: major, type, codingPath: codingPath)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let header = try header(expecting: .object, [String: Any].self)
        return KeyedDecodingContainer(BinaryKeyedDecodingContainer<Key>(core: core, header: header, pathCount: pathCount, extraPath: []))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let header = try header(expecting: .array, [Any].self)
        return BinaryUnkeyedDecodingContainer(core: core, header: header, pathCount: pathCount, extraPath: [])
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        BinarySingleValueDecodingContainer(core: core, offset: offset, pathCount: pathCount)
    }
}

/// A keyed container: its fields, each a field id and a value.
struct BinaryKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let core: BinaryDecoderCore
    let start: Int
    let end: Int
    let pathCount: Int
    let extraPath: [any CodingKey]

    init(core: BinaryDecoderCore, header: ObjectHeader, pathCount: Int, extraPath: [any CodingKey]) {
        self.core = core
        start = header.contentStart
        end = header.end
        self.pathCount = pathCount
        self.extraPath = extraPath
    }

    var codingPath: [any CodingKey] { core.codingPath(pathCount, extraPath, nil) }

    /// The nesting level under which this container keeps its lookup hint.
    private var hintLevel: Int { pathCount + extraPath.count }

    var allKeys: [Key] {
        var keys: [Key] = []
        var position = start
        while position < end {
            guard let id = try? core.reader.varint(at: &position, limit: end),
                  let value = try? core.reader.header(at: position, limit: end) else { break }
            position = value.end
            if id & 1 == 1 {
                if let int = ObjectFormat.intKey(fromFieldID: id), let key = Key(intValue: int) ?? Key(stringValue: String(int)) { keys.append(key) }
            } else if let name = try? core.name(ofFieldID: id), let key = Key(stringValue: name) {
                keys.append(key)
            }
        }
        return keys
    }

    /// The value of `key`, or nil when the container has no such field.
    func find(_ key: Key) throws(ObjectFault) -> ObjectHeader? {
        let integerKey = key.objectIntegerKey
        let name = integerKey == nil ? key.stringValue : ""
        // Fast path: the field right after the previous lookup, or the first one (fields asked for
        // in the order they were written).
        let hint = core.hint(level: hintLevel, container: start) ?? start
        if hint < end {
            var position = hint
            let id = try core.reader.varint(at: &position, limit: end)
            let value = try core.reader.header(at: position, limit: end)
            let matches = if let integerKey { id == ObjectFormat.fieldID(intKey: integerKey) } else { core.fieldID(id, isName: name) }
            if matches {
                core.setHint(level: hintLevel, container: start, position: value.end)
                return value
            }
        }
        let wanted: UInt64
        if let integerKey {
            wanted = ObjectFormat.fieldID(intKey: integerKey)
        } else {
            guard let index = core.index(ofName: name) else { return nil }  // not in this record at all
            wanted = ObjectFormat.fieldID(nameIndex: index)
        }
        var position = start
        while position < end {
            let id = try core.reader.varint(at: &position, limit: end)
            let value = try core.reader.header(at: position, limit: end)
            if id == wanted {
                core.setHint(level: hintLevel, container: start, position: value.end)
                return value
            }
            position = value.end
        }
        return nil
    }

    func contains(_ key: Key) -> Bool {
        (try? find(key)) != nil
    }

    /// The value of `key`; throws `keyNotFound` when there is none. Errors carry the coding path.
    @inline(__always)
    private func header(forKey key: Key, _ type: Any.Type) throws -> ObjectHeader {
        let header: ObjectHeader?
        do { header = try find(key) } catch {
            throw core.decodingError(error, type: type, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        guard let header else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "no value for key \"\(key.stringValue)\""))
        }
        return header
    }

    @inline(__always)
    private func read<T: ObjectPrimitive>(_ type: T.Type, _ key: Key) throws -> T {
        let header = try header(forKey: key, T.self)
        do { return try T.read(core.reader, header) } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
    }

    /// As `read`, but nil for a missing field or a null.
    @inline(__always)
    private func readIfPresent<T: ObjectPrimitive>(_ type: T.Type, _ key: Key) throws -> T? {
        do {
            guard let header = try find(key), header.tag != ObjectFormat.Simple.null.rawValue else { return nil }
            return try T.read(core.reader, header)
        } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        try header(forKey: key, Any?.self).tag == ObjectFormat.Simple.null.rawValue
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try read(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try read(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try read(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try read(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try read(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try read(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try read(type, key) }
    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { try read(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try read(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try read(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try read(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try read(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try read(type, key) }
    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { try read(type, key) }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: Int128.Type, forKey key: Key) throws -> Int128? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try readIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt128.Type, forKey key: Key) throws -> UInt128? { try readIfPresent(type, key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try core.decodeValue(T.self, try header(forKey: key, T.self), pathCount: pathCount, extra: extraPath, key: key)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        let header: ObjectHeader?
        do throws(ObjectFault) { header = try find(key) } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        guard let header, header.tag != ObjectFormat.Simple.null.rawValue else { return nil }
        return try core.decodeValue(T.self, header, pathCount: pathCount, extra: extraPath, key: key)
    }

    private func nested(_ key: Key, expecting major: ObjectFormat.Major) throws -> ObjectHeader {
        let header = try header(forKey: key, Any.self)
        guard header.major == major else {
            throw core.decodingError(core.reader.mismatch(major == .object ? "a keyed container" : "an unkeyed container", header),
                                     type: Any.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        return header
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let header = try nested(key, expecting: .object)
        return KeyedDecodingContainer(BinaryKeyedDecodingContainer<NestedKey>(core: core, header: header, pathCount: pathCount, extraPath: extraPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let header = try nested(key, expecting: .array)
        return BinaryUnkeyedDecodingContainer(core: core, header: header, pathCount: pathCount, extraPath: extraPath + [key])
    }

    func superDecoder() throws -> any Decoder {
        let container = BinaryKeyedDecodingContainer<ObjectNameKey>(core: core, start: start, end: end, pathCount: pathCount, extraPath: extraPath)
        return try container.superDecoder(forKey: .super)
    }

    /// A decoder of the value of `key`; an absent value reads as null (as in JSON).
    func superDecoder(forKey key: Key) throws -> any Decoder {
        let header: ObjectHeader?
        do { header = try find(key) } catch {
            throw core.decodingError(error, type: Any.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        return BinarySuperDecoder(core: core, offset: header?.offset ?? -1, codingPath: core.codingPath(pathCount, extraPath, key))
    }
}

extension BinaryKeyedDecodingContainer {
    init(core: BinaryDecoderCore, start: Int, end: Int, pathCount: Int, extraPath: [any CodingKey]) {
        self.core = core
        self.start = start
        self.end = end
        self.pathCount = pathCount
        self.extraPath = extraPath
    }
}

/// The decoder of `superDecoder()`: a value with a coding path of its own (the container's path
/// and the key), which its containers carry as their extra path.
struct BinarySuperDecoder: Decoder {
    let core: BinaryDecoderCore
    /// -1 for an absent value, which reads as null.
    let offset: Int
    let codingPath: [any CodingKey]

    var userInfo: [CodingUserInfoKey: Any] { core.userInfo }

    /// The coding path as the current path plus extra keys.
    private var pathParts: (count: Int, extra: [any CodingKey]) {
        let count = min(core.path.count, codingPath.count)
        return (count, Array(codingPath.dropFirst(count)))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let header = try core.containerHeader(at: offset, expecting: .object, [String: Any].self, codingPath: codingPath)
        let (count, extra) = pathParts
        return KeyedDecodingContainer(BinaryKeyedDecodingContainer<Key>(core: core, header: header, pathCount: count, extraPath: extra))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let header = try core.containerHeader(at: offset, expecting: .array, [Any].self, codingPath: codingPath)
        let (count, extra) = pathParts
        return BinaryUnkeyedDecodingContainer(core: core, header: header, pathCount: count, extraPath: extra)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        BinarySingleValueDecodingContainer(core: core, offset: offset, pathCount: core.path.count)
    }
}

/// An unkeyed container: its elements back to back.
struct BinaryUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let core: BinaryDecoderCore
    let start: Int
    let end: Int
    let pathCount: Int
    let extraPath: [any CodingKey]
    private var position: Int
    private(set) var currentIndex = 0

    init(core: BinaryDecoderCore, header: ObjectHeader, pathCount: Int, extraPath: [any CodingKey]) {
        self.core = core
        start = header.contentStart
        end = header.end
        position = start
        self.pathCount = pathCount
        self.extraPath = extraPath
    }

    var codingPath: [any CodingKey] { core.codingPath(pathCount, extraPath, nil) }

    var isAtEnd: Bool { position >= end }

    /// Counted by walking the elements (each skip is O(1)); nil if they are damaged.
    var count: Int? {
        var count = 0
        var position = start
        while position < end {
            guard let header = try? core.reader.header(at: position, limit: end) else { return nil }
            position = header.end
            count += 1
        }
        return count
    }

    /// The next element's header, not yet consumed.
    @inline(__always)
    private func peek(_ type: Any.Type) throws -> ObjectHeader {
        guard position < end else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(
                codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)), debugDescription: "the unkeyed container is at its end"))
        }
        do { return try core.reader.header(at: position, limit: end) } catch {
            throw core.decodingError(error, type: type, codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)))
        }
    }

    @inline(__always)
    private mutating func consume(_ header: ObjectHeader) {
        position = header.end
        currentIndex += 1
    }

    @inline(__always)
    private mutating func next<T: ObjectPrimitive>(_ type: T.Type) throws -> T {
        let header = try peek(T.self)
        do {
            let value = try T.read(core.reader, header)
            consume(header)
            return value
        } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)))
        }
    }

    mutating func decodeNil() throws -> Bool {
        let header = try peek(Any?.self)
        guard header.tag == ObjectFormat.Simple.null.rawValue else { return false }
        consume(header)
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) }
    mutating func decode(_ type: Int128.Type) throws -> Int128 { try next(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) }
    mutating func decode(_ type: UInt128.Type) throws -> UInt128 { try next(type) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let header = try peek(T.self)
        let value = try core.decodeValue(T.self, header, pathCount: pathCount, extra: extraPath, key: ObjectIndexKey(currentIndex))
        consume(header)
        return value
    }

    private mutating func nested(expecting major: ObjectFormat.Major) throws -> ObjectHeader {
        let header = try peek(Any.self)
        guard header.major == major else {
            throw core.decodingError(core.reader.mismatch(major == .object ? "a keyed container" : "an unkeyed container", header),
                                     type: Any.self, codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)))
        }
        consume(header)
        return header
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let header = try nested(expecting: .object)
        return KeyedDecodingContainer(BinaryKeyedDecodingContainer<NestedKey>(
            core: core, header: header, pathCount: pathCount, extraPath: extraPath + [ObjectIndexKey(currentIndex - 1)]))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let header = try nested(expecting: .array)
        return BinaryUnkeyedDecodingContainer(core: core, header: header, pathCount: pathCount, extraPath: extraPath + [ObjectIndexKey(currentIndex - 1)])
    }

    mutating func superDecoder() throws -> any Decoder {
        let header = try peek(Any.self)
        consume(header)
        return BinarySuperDecoder(core: core, offset: header.offset, codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex - 1)))
    }
}

/// A value read as a single value.
struct BinarySingleValueDecodingContainer: SingleValueDecodingContainer {
    let core: BinaryDecoderCore
    let offset: Int
    let pathCount: Int

    var codingPath: [any CodingKey] { Array(core.path.prefix(pathCount)) }

    @inline(__always)
    private func header(_ type: Any.Type) throws -> ObjectHeader {
        guard offset >= 0 else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: codingPath, debugDescription: "no value"))
        }
        do { return try core.reader.header(at: offset, limit: core.reader.bytes.count) } catch {
            throw core.decodingError(error, type: type, codingPath: codingPath)
        }
    }

    @inline(__always)
    private func read<T: ObjectPrimitive>(_ type: T.Type) throws -> T {
        let header = try header(T.self)
        do { return try T.read(core.reader, header) } catch {
            throw core.decodingError(error, type: T.self, codingPath: codingPath)
        }
    }

    func decodeNil() -> Bool {
        guard offset >= 0 else { return true }
        return (try? core.reader.header(at: offset, limit: core.reader.bytes.count))?.tag == ObjectFormat.Simple.null.rawValue
    }

    func decode(_ type: Bool.Type) throws -> Bool { try read(type) }
    func decode(_ type: String.Type) throws -> String { try read(type) }
    func decode(_ type: Double.Type) throws -> Double { try read(type) }
    func decode(_ type: Float.Type) throws -> Float { try read(type) }
    func decode(_ type: Int.Type) throws -> Int { try read(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try read(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try read(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try read(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try read(type) }
    func decode(_ type: Int128.Type) throws -> Int128 { try read(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try read(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try read(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try read(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try read(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try read(type) }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try read(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let header = try header(T.self)
        // The same value, read as T: no key is added to the path.
        return try core.decodeValue(T.self, header, pathCount: pathCount, extra: [], key: nil)
    }
}
