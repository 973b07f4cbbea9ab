/// The file `DIR/COMPACTION`: the segments a finished compaction replaced, written (atomically)
/// after its output segments are durable and before the inputs are deleted. FORMAT.md, "Compaction".
///
/// ```
///  0  8 bytes  magic "CASKCMP\0"
///  8  u16      version (1)
/// 10  u16      reserved, zero
/// 12  u32      count: the number of input segment ids
/// 16  u64 × count  input segment ids
///     u32      crc32c of every byte before it
/// ```
/// Deleting the inputs is not atomic; the manifest makes it so. An open that finds a valid manifest
/// finishes the deletion (or, read-only, ignores the listed segments) before reading anything, so no
/// crash can leave some inputs deleted and others not — which could bring a deleted key back, when a
/// tombstone dropped by the compaction shadowed a put in an input that survived.
package enum CompactionManifest {
    package static let fileName = "COMPACTION"
    static let magic: [UInt8] = Array("CASKCMP".utf8) + [0]
    static let maxInputs = 1 << 20

    package static func encode(inputs: [UInt64]) -> [UInt8] {
        var buffer = ByteBuffer(capacity: 20 + inputs.count * 8)
        magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: UInt16(1))
        buffer.append(littleEndian: UInt16(0))
        buffer.append(littleEndian: UInt32(inputs.count))
        for id in inputs { buffer.append(littleEndian: id) }
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: $0) }
        buffer.append(littleEndian: crc)
        return buffer.copyBytes()
    }

    /// The input ids, or nil when the bytes are not a valid manifest.
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> [UInt64]? {
        guard bytes.count >= 20, bytes.prefix(8).elementsEqual(magic),
              bytes.readLittleEndian(at: 8, as: UInt16.self) == 1 else { return nil }
        let count = Int(bytes.readLittleEndian(at: 12, as: UInt32.self))
        guard count <= maxInputs, bytes.count == 16 + count * 8 + 4 else { return nil }
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<(16 + count * 8)]))
        guard crc == bytes.readLittleEndian(at: 16 + count * 8, as: UInt32.self) else { return nil }
        return (0..<count).map { bytes.readLittleEndian(at: 16 + $0 * 8, as: UInt64.self) }
    }
}
