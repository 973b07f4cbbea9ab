import Foundation

extension ObjectCoder {
    /// The bytes ``CaskStore/set(_:forKey:coder:)`` writes for `value` with this coder: for a caller
    /// that puts them itself (in a ``WriteBatch``, say), or checks their size first.
    ///
    /// Throws what the coder throws (usually `EncodingError`) when the value does not encode.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        switch self {
        case .binary: try CaskBinaryEncoder().encode(value)
        case .json, .propertyList: Array(try CaskStore.foundationEncode(value, self))
        }
    }

    /// `value` decoded from bytes this coder wrote, as ``CaskStore/get(_:forKey:coder:)`` decodes it.
    ///
    /// Throws what the coder throws (usually `DecodingError`) when the bytes do not decode as `T`.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        switch self {
        case .binary: try CaskBinaryDecoder().decode(T.self, from: bytes)
        case .json: try JSONDecoder().decode(T.self, from: Data(bytes))
        case .propertyList: try PropertyListDecoder().decode(T.self, from: Data(bytes))
        }
    }
}
