/// Encodes records into a byte buffer. Owned by the store's writer (not thread-safe): the writer
/// mutex rules out overlapping access, so `scratch` opts out of dynamic exclusivity checks (they
/// were three runtime calls per record).
///
/// A value is LZ4-compressed when it is at least ``minimumCompressibleLength`` bytes and the
/// block saves at least 1/8 of them; otherwise it is stored raw. Encoding allocates nothing once
/// the buffers have grown to the working size.
package final class RecordEncoder {
    /// Values shorter than this are never compressed: LZ4 cannot save 1/8 of them reliably.
    package static let minimumCompressibleLength = 32

    private let compressor = LZ4Compressor()
    /// The payload length of the last record ``append(type:seq:key:value:expiresAt:batchMember:dictionary:to:)`` wrote.
    package private(set) var lastStoredLength = 0
    @exclusivity(unchecked) private var scratch = ByteBuffer(capacity: 4096)

    package init() {}

    /// Appends one complete record (checksum included) to `buffer`; returns its length in bytes.
    /// The caller has checked the key and value lengths against ``Limits``. With a `dictionary` (the
    /// one the record's segment names), a compressed value is compressed against it and flagged
    /// ``RecordFlags/dictionary``.
    package func append(
        type: RecordType, seq: UInt64, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
        expiresAt: UInt64?, batchMember: Bool = false, dictionary: LZ4Dictionary? = nil, to buffer: inout ByteBuffer
    ) -> Int {
        var flags: UInt8 = (expiresAt == nil ? 0 : RecordFlags.expires) | (batchMember ? RecordFlags.batchMember : 0)
        var storedLength = value.count
        if value.count >= Self.minimumCompressibleLength && type == .put {
            let allowed = value.count - value.count / 8  // must save at least 1/8
            scratch.count = 0
            var compressedLength = 0
            scratch.appendWithUnsafeSpace(allowed) { space in
                compressedLength = compressor.compress(value, into: space, dictionary: dictionary) ?? 0
                return compressedLength
            }
            if compressedLength > 0 {
                flags |= RecordFlags.lz4 | (dictionary == nil ? 0 : RecordFlags.dictionary)
                storedLength = compressedLength
            }
        }
        let compressed = flags & RecordFlags.lz4 != 0
        lastStoredLength = storedLength
        let limit = Limits.maxRecordHeaderLength + key.count + storedLength
        var length = 0
        // One reservation, then the header is written field by field through a pointer: this is the
        // put hot path, and per-field appends each re-check the capacity.
        scratch.withUnsafeBytes { compressedValue in
            buffer.appendWithUnsafeSpace(limit) { space in
                let base = space.baseAddress!
                base.storeBytes(of: type.rawValue, toByteOffset: 4, as: UInt8.self)
                base.storeBytes(of: flags, toByteOffset: 5, as: UInt8.self)
                var position = 6
                position += Varint.write(seq, to: base + position)
                position += Varint.write(UInt64(key.count), to: base + position)
                position += Varint.write(UInt64(value.count), to: base + position)
                if compressed { position += Varint.write(UInt64(storedLength), to: base + position) }
                if let expiresAt {
                    base.storeBytes(of: expiresAt.littleEndian, toByteOffset: position, as: UInt64.self)
                    position += 8
                }
                if let keyBase = key.baseAddress { (base + position).copyMemory(from: keyBase, byteCount: key.count) }
                position += key.count
                let payload = compressed ? compressedValue : value
                if let payloadBase = payload.baseAddress { (base + position).copyMemory(from: payloadBase, byteCount: storedLength) }
                position += storedLength
                let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(start: base + 4, count: position - 4))
                base.storeBytes(of: crc.littleEndian, toByteOffset: 0, as: UInt32.self)
                length = position
                return position
            }
        }
        if scratch.capacity > 1 << 20 { scratch.reset(shrinkingTo: 4096) }  // do not pin a huge value's buffer
        return length
    }

    /// Turns a valid batch member record into an ordinary one, in place: clears
    /// ``RecordFlags/batchMember`` and recomputes the checksum.
    package static func clearBatchMemberFlag(_ record: UnsafeMutableRawBufferPointer) {
        precondition(record.count > 6)
        record[5] &= ~RecordFlags.batchMember
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: record[4...]))
        record.storeBytes(of: crc.littleEndian, toByteOffset: 0, as: UInt32.self)
    }
}
