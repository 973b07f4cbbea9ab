import Foundation

/// The floor under any `Codable` coder: `objects_encode` and `objects_decode` run it beside Cask's
/// binary coder and Foundation's, as the coder `floor`.
///
/// It goes through the same machinery every coder does (the model's synthesized `encode(to:)` and
/// `init(from:)`, a keyed container box per object, a witness call per field) and builds what every
/// decoder must (each string from its UTF-8 bytes, each URL parsed, each array filled), but its
/// format is the least there is: the values in the order the model writes them, no tags, no keys,
/// no lengths but those of strings and arrays, nothing validated. A decoder that reads a real
/// format, checks it and survives damage can approach this figure, never pass it; so it says how
/// much of a coder's time is its own, and how fast a Codable coder can be on this machine.
///
/// It reads back only what it wrote, in the same order: models whose `init(from:)` asks for fields
/// in the order `encode(to:)` wrote them (synthesized conformances do). Benchmark use only.
final class FloorEncoder {
    fileprivate var bytes: [UInt8] = []

    func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        bytes.removeAll(keepingCapacity: true)
        try put(value)
        return bytes  // a copy of the reused buffer: one allocation, as any encoder returning bytes
    }

    fileprivate func put<T: Encodable>(_ value: T) throws {
        // Type tests, then casts that cannot fail (cheaper than `as?` on every value).
        if T.self == String.self {
            put(unsafeBitCast(value, to: String.self))
        } else if T.self == UUID.self {
            withUnsafeBytes(of: unsafeBitCast(value, to: UUID.self).uuid) { bytes.append(contentsOf: $0) }
        } else if T.self == Date.self {
            put(unsafeBitCast(value, to: Date.self).timeIntervalSinceReferenceDate.bitPattern)
        } else if T.self == URL.self {
            put(unsafeBitCast(value, to: URL.self).absoluteString)
        } else if MemoryLayout<T>.size == MemoryLayout<[Int]>.size, let array = value as? any FloorArrayCoding {
            try array.floorEncode(self)
        } else {
            try value.encode(to: FloorEncoderSlot(encoder: self))
        }
    }

    fileprivate func put(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    fileprivate func put(_ string: String) {
        var string = string
        string.withUTF8 { utf8 in
            put(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
}

private struct FloorEncoderSlot: Encoder {
    let encoder: FloorEncoder
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(FloorKeyedEncoder<Key>(encoder: encoder))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { fatalError("the floor coder writes arrays itself, and nothing else unkeyed") }
    func singleValueContainer() -> any SingleValueEncodingContainer { FloorSingleValueEncoder(encoder: encoder) }
}

private struct FloorKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: FloorEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) { encoder.bytes.append(0) }
    mutating func encode(_ value: Bool, forKey key: Key) { encoder.bytes.append(value ? 1 : 0) }
    mutating func encode(_ value: String, forKey key: Key) { encoder.put(value) }
    mutating func encode(_ value: Double, forKey key: Key) { encoder.put(value.bitPattern) }
    mutating func encode(_ value: Int, forKey key: Key) { encoder.put(UInt64(bitPattern: Int64(value))) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try encoder.put(value) }

    /// A presence byte, so that the decoder knows (the synthesized code writes nothing for nil).
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        guard let value else { return encoder.bytes.append(0) }
        encoder.bytes.append(1)
        try encoder.put(value)
    }

    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        guard let value else { return encoder.bytes.append(0) }
        encoder.bytes.append(1)
        encoder.put(value)
    }

    mutating func nestedContainer<N: CodingKey>(keyedBy keyType: N.Type, forKey key: Key) -> KeyedEncodingContainer<N> {
        KeyedEncodingContainer(FloorKeyedEncoder<N>(encoder: encoder))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { fatalError("no unkeyed containers") }
    mutating func superEncoder() -> any Encoder { FloorEncoderSlot(encoder: encoder) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { FloorEncoderSlot(encoder: encoder) }
}

/// A single value (an enum's raw value, a wrapper's one field).
private struct FloorSingleValueEncoder: SingleValueEncodingContainer {
    let encoder: FloorEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil() { encoder.bytes.append(0) }
    mutating func encode(_ value: Bool) { encoder.bytes.append(value ? 1 : 0) }
    mutating func encode(_ value: String) { encoder.put(value) }
    mutating func encode(_ value: Double) { encoder.put(value.bitPattern) }
    mutating func encode(_ value: Int) { encoder.put(UInt64(bitPattern: Int64(value))) }
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.put(value) }
}

/// Arrays, their count first and then their elements (without `Array.encode(to:)`'s unkeyed
/// container, as Cask's coder writes them). The floor has no unkeyed containers otherwise.
protocol FloorArrayCoding {
    func floorEncode(_ encoder: FloorEncoder) throws
    static func floorDecode(_ decoder: FloorDecoder) throws -> Self
}

extension Array: FloorArrayCoding where Element: Codable {
    func floorEncode(_ encoder: FloorEncoder) throws {
        encoder.put(UInt64(count))
        for element in self { try encoder.put(element) }
    }

    static func floorDecode(_ decoder: FloorDecoder) throws -> Self {
        let count = Int(decoder.word())
        var elements: [Element] = []
        elements.reserveCapacity(count)
        for _ in 0..<count { elements.append(try decoder.value(Element.self)) }
        return elements
    }
}

/// Reads back what ``FloorEncoder`` wrote. Checks nothing: given other bytes, it traps.
final class FloorDecoder {
    fileprivate var base: UnsafeRawPointer?
    fileprivate var position = 0

    func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { buffer in
            base = buffer.baseAddress
            position = 0
            defer { base = nil }
            return try value(T.self)
        }
    }

    fileprivate func value<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == String.self { return unsafeBitCast(string(), to: T.self) }
        if T.self == UUID.self {
            let uuid = UnsafeRawPointer(base!).loadUnaligned(fromByteOffset: position, as: uuid_t.self)
            position += 16
            return unsafeBitCast(UUID(uuid: uuid), to: T.self)
        }
        if T.self == Date.self { return unsafeBitCast(Date(timeIntervalSinceReferenceDate: Double(bitPattern: word())), to: T.self) }
        if T.self == URL.self { return unsafeBitCast(URL(string: string())!, to: T.self) }
        if MemoryLayout<T>.size == MemoryLayout<[Int]>.size, let array = T.self as? any FloorArrayCoding.Type {
            return try Self.cast(array.floorDecode(self), to: T.self)
        }
        return try T(from: FloorDecoderSlot(decoder: self))
    }

    private static func cast<A, T>(_ value: A, to type: T.Type) throws -> T { value as! T }

    fileprivate func word() -> UInt64 {
        defer { position += 8 }
        return UInt64(littleEndian: base!.loadUnaligned(fromByteOffset: position, as: UInt64.self))
    }

    fileprivate func byte() -> UInt8 {
        defer { position += 1 }
        return base!.load(fromByteOffset: position, as: UInt8.self)
    }

    fileprivate func string() -> String {
        let count = Int(word())
        defer { position += count }
        return String(decoding: UnsafeRawBufferPointer(start: base! + position, count: count), as: UTF8.self)
    }
}

private struct FloorDecoderSlot: Decoder {
    let decoder: FloorDecoder
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(FloorKeyedDecoder<Key>(decoder: decoder))
    }

    func unkeyedContainer() -> any UnkeyedDecodingContainer { fatalError("the floor coder reads arrays itself, and nothing else unkeyed") }
    func singleValueContainer() -> any SingleValueDecodingContainer { FloorSingleValueDecoder(decoder: decoder) }
}

private struct FloorKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: FloorDecoder
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) -> Bool { decoder.byte() == 0 }
    func decode(_ type: Bool.Type, forKey key: Key) -> Bool { decoder.byte() != 0 }
    func decode(_ type: String.Type, forKey key: Key) -> String { decoder.string() }
    func decode(_ type: Double.Type, forKey key: Key) -> Double { Double(bitPattern: decoder.word()) }
    func decode(_ type: Int.Type, forKey key: Key) -> Int { Int(Int64(bitPattern: decoder.word())) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder.value(T.self) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        decoder.byte() == 0 ? nil : try decoder.value(T.self)
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) -> String? {
        decoder.byte() == 0 ? nil : decoder.string()
    }

    func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: Key) -> KeyedDecodingContainer<N> {
        KeyedDecodingContainer(FloorKeyedDecoder<N>(decoder: decoder))
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedDecodingContainer { fatalError("no unkeyed containers") }
    func superDecoder() -> any Decoder { FloorDecoderSlot(decoder: decoder) }
    func superDecoder(forKey key: Key) -> any Decoder { FloorDecoderSlot(decoder: decoder) }
}

private struct FloorSingleValueDecoder: SingleValueDecodingContainer {
    let decoder: FloorDecoder
    var codingPath: [any CodingKey] { [] }

    func decodeNil() -> Bool { decoder.byte() == 0 }
    func decode(_ type: Bool.Type) -> Bool { decoder.byte() != 0 }
    func decode(_ type: String.Type) -> String { decoder.string() }
    func decode(_ type: Double.Type) -> Double { Double(bitPattern: decoder.word()) }
    func decode(_ type: Int.Type) -> Int { Int(Int64(bitPattern: decoder.word())) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.value(T.self) }
}
