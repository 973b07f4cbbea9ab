/// Encodes records into a byte buffer. Owned by the store's writer (not thread-safe).
///
/// A value is LZ4-compressed when it is at least ``minimumCompressibleLength`` bytes and the
/// block saves at least 1/8 of them; otherwise it is stored raw. Encoding allocates nothing once
/// the buffers have grown to the working size.
package final class RecordEncoder {
    /// Values shorter than this are never compressed: LZ4 cannot save 1/8 of them reliably.
    package static let minimumCompressibleLength = 32

    private let compressor = LZ4Compressor()
    private var scratch = ByteBuffer(capacity: 4096)

    package init() {}

    /// Appends one complete record (checksum included) to `buffer`; returns its length in bytes.
    /// The caller has checked the key and value lengths against ``Limits``.
    package func append(
        type: RecordType, seq: UInt64, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
        expiresAt: UInt64?, to buffer: inout ByteBuffer
    ) -> Int {
        var flags: UInt8 = expiresAt == nil ? 0 : RecordFlags.expires
        var storedLength = value.count
        if value.count >= Self.minimumCompressibleLength {
            let allowed = value.count - value.count / 8  // must save at least 1/8
            scratch.count = 0
            var compressedLength = 0
            scratch.appendWithUnsafeSpace(allowed) { space in
                compressedLength = compressor.compress(value, into: space) ?? 0
                return compressedLength
            }
            if compressedLength > 0 {
                flags |= RecordFlags.lz4
                storedLength = compressedLength
            }
        }
        let start = buffer.count
        buffer.reserve(Limits.maxRecordHeaderLength + key.count + storedLength)
        buffer.append(littleEndian: UInt32(0))  // checksum, set below
        buffer.append(byte: type.rawValue)
        buffer.append(byte: flags)
        buffer.append(varint: seq)
        buffer.append(varint: UInt64(key.count))
        buffer.append(varint: UInt64(value.count))
        if flags & RecordFlags.lz4 != 0 { buffer.append(varint: UInt64(storedLength)) }
        if let expiresAt { buffer.append(littleEndian: expiresAt) }
        buffer.append(key)
        if flags & RecordFlags.lz4 != 0 {
            scratch.withUnsafeBytes { buffer.append($0) }
        } else {
            buffer.append(value)
        }
        let end = buffer.count
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: $0[(start + 4)..<end])) }
        buffer.set(littleEndian: crc, at: start)
        if scratch.capacity > 1 << 20 { scratch.reset(shrinkingTo: 4096) }  // do not pin a huge value's buffer
        return end - start
    }
}
