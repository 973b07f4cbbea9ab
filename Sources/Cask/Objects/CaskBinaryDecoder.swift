import Foundation

/// Decodes `Decodable` values from Cask's binary coding (see ``CaskBinaryEncoder`` and FORMAT.md,
/// "Object coding").
///
/// Any input is safe to decode: damaged or truncated bytes throw `DecodingError.dataCorrupted`
/// (never a crash), every length is checked against the bytes that remain before anything is sized
/// from it, and values nested more than 256 deep are refused. A record written by an older model
/// decodes into a newer one that gained optional fields, lost fields or reordered them.
///
/// Not thread-safe: use one decoder per thread (the store keeps a pool). A decoder, or a container,
/// kept by an `init(from:)` past the call reads nothing.
public final class CaskBinaryDecoder {
    /// Passed to `init(from:)` implementations as `decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: Any] {
        get { core.userInfo }
        set { core.userInfo = newValue }
    }

    let core = BinaryDecoderCore()

    public init() {}

    /// Decodes a `T` from `bytes`. Throws a `DecodingError` (or what `T.init(from:)` throws).
    public func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        if let result = try bytes.withContiguousStorageIfAvailable({ try core.decode(type, from: UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return try Array(bytes).withUnsafeBytes { try core.decode(type, from: $0) }
    }

    /// Decodes a `T` from `bytes` (the overload an array of bytes takes, with no generic
    /// dispatch over the collection).
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try core.decode(type, from: $0) }
    }

    /// Decodes a `T` from raw bytes, which need to stay valid only for the call.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer) throws -> T {
        try core.decode(type, from: bytes)
    }
}
