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
        guard offset >= 0 else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: codingPath, debugDescription: "no value"))
        }
        do throws(ObjectFault) {
            let header = try core.reader.header(at: offset, limit: core.reader.bytes.count)
            guard header.major == major else {
                throw core.reader.mismatch(major == .object ? "a keyed container" : "an unkeyed container", header)
            }
            return header
        } catch {
            throw core.decodingError(error, type: type, codingPath: codingPath)
        }
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
        // Fast path: the field right after the previous lookup (fields asked for in written order).
        if let hint = core.hint(level: hintLevel, container: start), hint < end {
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

    /// Finds `key` and reads its value with `read`; errors carry the coding path.
    @inline(__always)
    private func read<T>(_ type: T.Type, _ key: Key, _ read: (ObjectHeader) throws(ObjectFault) -> T) throws -> T {
        let header: ObjectHeader?
        do throws(ObjectFault) { header = try find(key) } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        guard let header else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "no value for key \"\(key.stringValue)\""))
        }
        do throws(ObjectFault) { return try read(header) } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
    }

    /// As `read`, but nil for a missing field or a null.
    @inline(__always)
    private func readIfPresent<T>(_ type: T.Type, _ key: Key, _ read: (ObjectHeader) throws(ObjectFault) -> T) throws -> T? {
        do throws(ObjectFault) {
            guard let header = try find(key), header.tag != ObjectFormat.Simple.null.rawValue else { return nil }
            return try read(header)
        } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        try read(Bool.self, key) { $0.tag == ObjectFormat.Simple.null.rawValue }
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(type, key, core.reader.bool) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(type, key, core.reader.string) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try read(type, key, core.reader.double) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try read(type, key, core.reader.float) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 { try read(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try readIfPresent(type, key, core.reader.bool) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try readIfPresent(type, key, core.reader.string) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try readIfPresent(type, key, core.reader.double) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try readIfPresent(type, key, core.reader.float) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: Int128.Type, forKey key: Key) throws -> Int128? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decodeIfPresent(_ type: UInt128.Type, forKey key: Key) throws -> UInt128? { try readIfPresent(type, key) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let header: ObjectHeader?
        do throws(ObjectFault) { header = try find(key) } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        guard let header else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "no value for key \"\(key.stringValue)\""))
        }
        return try core.decodeValue(T.self, header, pathCount: pathCount, extra: extraPath, key: key)
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
        try read(ObjectHeader.self, key) { header throws(ObjectFault) in
            guard header.major == major else {
                throw core.reader.mismatch(major == .object ? "a keyed container" : "an unkeyed container", header)
            }
            return header
        }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let header = try nested(key, expecting: .object)
        return KeyedDecodingContainer(BinaryKeyedDecodingContainer<NestedKey>(core: core, header: header, pathCount: pathCount, extraPath: extraPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let header = try nested(key, expecting: .array)
        return BinaryUnkeyedDecodingContainer(core: core, header: header, pathCount: pathCount, extraPath: extraPath + [key])
    }

    func superDecoder() throws -> any Decoder { try superDecoder(named: ObjectNameKey.super) }

    func superDecoder(forKey key: Key) throws -> any Decoder { try superDecoder(named: key) }

    private func superDecoder(named key: some CodingKey) throws -> any Decoder {
        let header: ObjectHeader?
        do throws(ObjectFault) {
            header = try BinaryKeyedDecodingContainer<ObjectNameKey>(core: core, start: start, end: end, pathCount: pathCount, extraPath: extraPath)
                .find(ObjectNameKey(key.stringValue))
        } catch {
            throw core.decodingError(error, type: Any.self, codingPath: core.codingPath(pathCount, extraPath, key))
        }
        // The decoder's path: this container's, plus the key. It is only pushed on `core.path` for
        // the values decoded through it, like any other nested value.
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

/// The decoder of `superDecoder()`: a value with a coding path of its own.
struct BinarySuperDecoder: Decoder {
    let core: BinaryDecoderCore
    let offset: Int
    let codingPath: [any CodingKey]

    var userInfo: [CodingUserInfoKey: Any] { core.userInfo }

    private func slot() -> (BinaryDecoderSlot, Int) {
        let depth = core.path.count
        core.path.append(contentsOf: codingPath.dropFirst(min(depth, codingPath.count)))
        return (BinaryDecoderSlot(core: core, offset: offset, pathCount: core.path.count), depth)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let (slot, depth) = slot()
        defer { core.path.removeSubrange(depth...) }
        return try slot.container(keyedBy: type)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (slot, depth) = slot()
        defer { core.path.removeSubrange(depth...) }
        return try slot.unkeyedContainer()
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

    @inline(__always)
    private mutating func next<T>(_ type: T.Type, _ read: (ObjectHeader) throws(ObjectFault) -> T) throws -> T {
        guard position < end else {
            throw DecodingError.valueNotFound(T.self, DecodingError.Context(
                codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)), debugDescription: "the unkeyed container is at its end"))
        }
        do throws(ObjectFault) {
            let header = try core.reader.header(at: position, limit: end)
            let value = try read(header)
            position = header.end
            currentIndex += 1
            return value
        } catch {
            throw core.decodingError(error, type: T.self, codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)))
        }
    }

    mutating func decodeNil() throws -> Bool {
        guard position < end else {
            throw DecodingError.valueNotFound(Any?.self, DecodingError.Context(
                codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)), debugDescription: "the unkeyed container is at its end"))
        }
        do throws(ObjectFault) {
            let header = try core.reader.header(at: position, limit: end)
            guard header.tag == ObjectFormat.Simple.null.rawValue else { return false }
            position = header.end
            currentIndex += 1
            return true
        } catch {
            throw core.decodingError(error, type: Any?.self, codingPath: core.codingPath(pathCount, extraPath, ObjectIndexKey(currentIndex)))
        }
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type, core.reader.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type, core.reader.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type, core.reader.double) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type, core.reader.float) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: Int128.Type) throws -> Int128 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    mutating func decode(_ type: UInt128.Type) throws -> UInt128 { try next(type) { [core] h throws(ObjectFault) in try core.reader.integer(h, as: type) } }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let header = try next(ObjectHeader.self) { $0 }
        do {
            return try core.decodeValue(T.self, header, pathCount: pathCount, extra: extraPath, key: ObjectIndexKey(currentIndex - 1))
        } catch {
            // The element was not consumed after all.
            position = header.offset
            currentIndex -= 1
            throw error
        }
    }

    private mutating func nested(expecting major: ObjectFormat.Major) throws -> ObjectHeader {
        try next(ObjectHeader.self) { [core] header throws(ObjectFault) in
            guard header.major == major else {
                throw core.reader.mismatch(major == .object ? "a keyed container" : "an unkeyed container", header)
            }
            return header
        }
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
        let header = try next(ObjectHeader.self) { $0 }
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
    private func read<T>(_ type: T.Type, _ read: (ObjectHeader) throws(ObjectFault) -> T) throws -> T {
        guard offset >= 0 else {
            throw DecodingError.valueNotFound(T.self, DecodingError.Context(codingPath: codingPath, debugDescription: "no value"))
        }
        do throws(ObjectFault) {
            return try read(try core.reader.header(at: offset, limit: core.reader.bytes.count))
        } catch {
            throw core.decodingError(error, type: T.self, codingPath: codingPath)
        }
    }

    func decodeNil() -> Bool {
        guard offset >= 0 else { return true }
        return (try? core.reader.header(at: offset, limit: core.reader.bytes.count))?.tag == ObjectFormat.Simple.null.rawValue
    }

    func decode(_ type: Bool.Type) throws -> Bool { try read(type, core.reader.bool) }
    func decode(_ type: String.Type) throws -> String { try read(type, core.reader.string) }
    func decode(_ type: Double.Type) throws -> Double { try read(type, core.reader.double) }
    func decode(_ type: Float.Type) throws -> Float { try read(type, core.reader.float) }
    func decode(_ type: Int.Type) throws -> Int { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int8.Type) throws -> Int8 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int16.Type) throws -> Int16 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int32.Type) throws -> Int32 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int64.Type) throws -> Int64 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: Int128.Type) throws -> Int128 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt.Type) throws -> UInt { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }
    func decode(_ type: UInt128.Type) throws -> UInt128 { try read(type) { h throws(ObjectFault) in try core.reader.integer(h, as: type) } }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let header = try read(ObjectHeader.self) { $0 }
        // The same value, read as T: no key is added to the path.
        return try core.decodeValue(T.self, header, pathCount: pathCount, extra: [], key: nil)
    }
}
