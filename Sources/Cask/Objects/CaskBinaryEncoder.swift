import Foundation

/// Encodes `Encodable` values in Cask's compact, self-describing binary coding — the default coder
/// of ``CaskStore/set(_:forKey:coder:)``, specified in FORMAT.md ("Object coding").
///
/// - Compact: integers are varints, field names are stored once per record in a name table and
///   referred to by index, `Data`/`[UInt8]` are raw bytes and `UUID` is 16 bytes.
/// - Self-describing: every value carries its type and length, so a reader can skip what it does not
///   know. A model that gains optional fields, loses fields or reorders them still decodes records
///   written by the older model; an integer field may widen, a `Float` become a `Double`.
/// - Streaming: values are written straight into a buffer reused from one call to the next, with no
///   intermediate tree. Nested containers must be encoded one after the other (as synthesized
///   `Codable` conformances do); interleaving writes to two sibling containers throws.
///
/// Not thread-safe: use one encoder per thread (the store keeps a pool). Containers may nest at most
/// 256 deep; a deeper value throws `EncodingError.invalidValue` instead of writing what could not be
/// read back.
public final class CaskBinaryEncoder {
    /// Passed to `encode(to:)` implementations as `encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: Any] {
        get { core.userInfo }
        set { core.userInfo = newValue }
    }

    let core = BinaryEncoderCore()

    public init() {}

    /// The encoding of `value`.
    /// Throws an `EncodingError` (or whatever the value's `encode(to:)` throws).
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try core.encode(value)
        return core.writer.withUnsafeBytes { Array($0) }
    }

    /// Encodes `value` and hands its bytes to `body` without copying them. The bytes live in the
    /// encoder's reusable buffer: they must not escape `body`, and are overwritten by the next call.
    public func withEncoding<T: Encodable, R>(of value: T, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try core.encode(value)
        return try core.writer.withUnsafeBytes(body)
    }
}
