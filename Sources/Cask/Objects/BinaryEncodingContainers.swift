/// The `Encoder` a value's `encode(to:)` receives: a slot of the encoding in progress.
struct BinaryEncoderSlot: Encoder {
    let core: BinaryEncoderCore
    let index: Int
    let id: UInt32

    var codingPath: [any CodingKey] {
        index < core.slots.count && core.slots[index].id == id ? core.codingPath(ofSlot: index) : core.path
    }

    var userInfo: [CodingUserInfoKey: Any] { core.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let frame = core.container(forSlot: index, id: id, major: .object)
        let pathCount = frame == nil ? 0 : core.slots[index].pathCount
        let extra = frame == nil || core.superKeys.isEmpty ? [] : core.superKeys[id].map { [$0] } ?? []
        return KeyedEncodingContainer(BinaryKeyedEncodingContainer<Key>(core: core, frame: frame, pathCount: pathCount, extraPath: extra))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let frame = core.container(forSlot: index, id: id, major: .array)
        let pathCount = frame == nil ? 0 : core.slots[index].pathCount
        let extra = frame == nil || core.superKeys.isEmpty ? [] : core.superKeys[id].map { [$0] } ?? []
        return BinaryUnkeyedEncodingContainer(core: core, frame: frame, pathCount: pathCount, extraPath: extra)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        BinarySingleValueEncodingContainer(core: core, index: index, id: id)
    }
}

/// A keyed container being written: each field is its id then its value.
struct BinaryKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let core: BinaryEncoderCore
    /// Nil when the container could not be started (the misuse is recorded; every write throws it).
    let frameID: UInt32
    let depth: Int
    let pathCount: Int
    let extraPath: [any CodingKey]

    init(core: BinaryEncoderCore, frame: (id: UInt32, depth: Int)?, pathCount: Int, extraPath: [any CodingKey]) {
        self.core = core
        frameID = frame?.id ?? 0
        depth = frame?.depth ?? Int.max
        self.pathCount = pathCount
        self.extraPath = extraPath
    }

    var codingPath: [any CodingKey] { Array(core.path.prefix(pathCount)) + extraPath }

    @inline(__always)
    private func begin(_ key: Key) throws {
        if depth == Int.max, core.failed { throw core.failure! }
        try core.prepareWrite(frame: frameID, depth: depth, codingPath: codingPath + [key])
        core.writeFieldID(key)
    }

    mutating func encodeNil(forKey key: Key) throws { try begin(key); core.writeNull() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try begin(key); core.writeBool(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { try begin(key); core.writeString(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try begin(key); core.writeDouble(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try begin(key); core.writeFloat(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try begin(key); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try begin(key); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try begin(key); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try begin(key); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try begin(key); core.writeSigned(value) }
    mutating func encode(_ value: Int128, forKey key: Key) throws { try begin(key); core.writeSigned128(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try begin(key); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try begin(key); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try begin(key); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try begin(key); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try begin(key); core.writeUnsigned(value) }
    mutating func encode(_ value: UInt128, forKey key: Key) throws { try begin(key); core.writeUnsigned128(value) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try begin(key)
        if extraPath.isEmpty {
            try core.encodeValue(value, key: key)
        } else {
            try core.withExtraPath(extraPath) { try core.encodeValue(value, key: key) }
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let frame: (id: UInt32, depth: Int)?
        do {
            try begin(key)
            frame = core.startFrame(.object, codingPath: codingPath + [key])
        } catch { frame = nil }
        return KeyedEncodingContainer(BinaryKeyedEncodingContainer<NestedKey>(core: core, frame: frame, pathCount: pathCount, extraPath: extraPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let frame: (id: UInt32, depth: Int)?
        do {
            try begin(key)
            frame = core.startFrame(.array, codingPath: codingPath + [key])
        } catch { frame = nil }
        return BinaryUnkeyedEncodingContainer(core: core, frame: frame, pathCount: pathCount, extraPath: extraPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: ObjectNameKey.super) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

    private func superEncoder(named key: some CodingKey) -> any Encoder {
        do {
            if depth == Int.max, core.failed { throw core.failure! }
            try core.prepareWrite(frame: frameID, depth: depth, codingPath: codingPath + [key])
            core.writeFieldID(key)
        } catch {
            return BinaryEncoderSlot(core: core, index: Int.max, id: 0)
        }
        let slot = core.makeSuperSlot(key: key, pathCount: pathCount)
        return BinaryEncoderSlot(core: core, index: slot.index, id: slot.id)
    }
}

/// An unkeyed container being written: its elements back to back.
struct BinaryUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let core: BinaryEncoderCore
    let frameID: UInt32
    let depth: Int
    let pathCount: Int
    let extraPath: [any CodingKey]

    init(core: BinaryEncoderCore, frame: (id: UInt32, depth: Int)?, pathCount: Int, extraPath: [any CodingKey]) {
        self.core = core
        frameID = frame?.id ?? 0
        depth = frame?.depth ?? Int.max
        self.pathCount = pathCount
        self.extraPath = extraPath
    }

    var codingPath: [any CodingKey] { Array(core.path.prefix(pathCount)) + extraPath }

    var count: Int {
        depth < core.frames.count && core.frames[depth].id == frameID ? core.frames[depth].count : 0
    }

    @inline(__always)
    private mutating func begin() throws {
        if depth == Int.max, core.failed { throw core.failure! }
        try core.prepareWrite(frame: frameID, depth: depth, codingPath: codingPath + [ObjectIndexKey(count)])
    }

    mutating func encodeNil() throws { try begin(); core.writeNull() }
    mutating func encode(_ value: Bool) throws { try begin(); core.writeBool(value) }
    mutating func encode(_ value: String) throws { try begin(); core.writeString(value) }
    mutating func encode(_ value: Double) throws { try begin(); core.writeDouble(value) }
    mutating func encode(_ value: Float) throws { try begin(); core.writeFloat(value) }
    mutating func encode(_ value: Int) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try begin(); core.writeSigned(value) }
    mutating func encode(_ value: Int128) throws { try begin(); core.writeSigned128(value) }
    mutating func encode(_ value: UInt) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try begin(); core.writeUnsigned(value) }
    mutating func encode(_ value: UInt128) throws { try begin(); core.writeUnsigned128(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        if core.writePrimitive(value) { return }
        let key = ObjectIndexKey(count - 1)
        if extraPath.isEmpty {
            try core.encodeComposite(value, key: key)
        } else {
            try core.withExtraPath(extraPath) { try core.encodeComposite(value, key: key) }
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let frame: (id: UInt32, depth: Int)?
        do {
            try begin()
            frame = core.startFrame(.object, codingPath: codingPath)
        } catch { frame = nil }
        return KeyedEncodingContainer(BinaryKeyedEncodingContainer<NestedKey>(
            core: core, frame: frame, pathCount: pathCount, extraPath: extraPath + [ObjectIndexKey(count - 1)]))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let frame: (id: UInt32, depth: Int)?
        do {
            try begin()
            frame = core.startFrame(.array, codingPath: codingPath)
        } catch { frame = nil }
        return BinaryUnkeyedEncodingContainer(core: core, frame: frame, pathCount: pathCount, extraPath: extraPath + [ObjectIndexKey(count - 1)])
    }

    mutating func superEncoder() -> any Encoder {
        do { try begin() } catch { return BinaryEncoderSlot(core: core, index: Int.max, id: 0) }
        let slot = core.makeSuperSlot(key: ObjectIndexKey(count - 1), pathCount: pathCount)
        return BinaryEncoderSlot(core: core, index: slot.index, id: slot.id)
    }
}

/// A value's single-value container: the value goes straight into the value's slot.
struct BinarySingleValueEncodingContainer: SingleValueEncodingContainer {
    let core: BinaryEncoderCore
    let index: Int
    let id: UInt32

    var codingPath: [any CodingKey] {
        index < core.slots.count && core.slots[index].id == id ? core.codingPath(ofSlot: index) : core.path
    }

    @inline(__always)
    private func begin() throws { try core.beginSingleValue(slot: index, id: id) }

    mutating func encodeNil() throws { try begin(); core.writeNull() }
    mutating func encode(_ value: Bool) throws { try begin(); core.writeBool(value) }
    mutating func encode(_ value: String) throws { try begin(); core.writeString(value) }
    mutating func encode(_ value: Double) throws { try begin(); core.writeDouble(value) }
    mutating func encode(_ value: Float) throws { try begin(); core.writeFloat(value) }
    mutating func encode(_ value: Int) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int8) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int16) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int32) throws { try begin(); core.writeSigned(Int64(value)) }
    mutating func encode(_ value: Int64) throws { try begin(); core.writeSigned(value) }
    mutating func encode(_ value: Int128) throws { try begin(); core.writeSigned128(value) }
    mutating func encode(_ value: UInt) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { try begin(); core.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { try begin(); core.writeUnsigned(value) }
    mutating func encode(_ value: UInt128) throws { try begin(); core.writeUnsigned128(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        // The value takes this slot's place: its own encode(to:) gets a fresh slot here.
        try core.encodeValue(value, key: nil)
    }
}
