/// A dictionary file, `NNNNNNNNNN.dict`: the content of one trained LZ4 dictionary, checksummed.
/// See FORMAT.md, "Dictionary files".
///
/// ```
///  0  8 bytes  magic "CASKDCT\0"
///  8  u16      format version (1)
/// 10  u16      header length (32)
/// 12  u32      dictionary id (also in the file name)
/// 16  u32      content length, 1 ... 65,536
/// 20  u32      crc32c of the content
/// 24  u32      reserved, zero
/// 28  u32      crc32c of bytes 0 ..< 28
/// 32           content; the file ends right after it
/// ```
package enum DictionaryFile {
    package static let magic: [UInt8] = Array("CASKDCT".utf8) + [0]
    package static let headerLength = 32
    package static let version: UInt16 = 1
    /// LZ4 refers back at most 64 KiB, so no dictionary needs more content than this.
    package static let maxContentLength = 65_536

    /// The whole file for `content` (1 ... ``maxContentLength`` bytes) under `id`.
    package static func encode(id: UInt32, content: UnsafeRawBufferPointer) -> [UInt8] {
        precondition((1...maxContentLength).contains(content.count) && id >= 1)
        var buffer = ByteBuffer(capacity: headerLength + content.count)
        magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: version)
        buffer.append(littleEndian: UInt16(headerLength))
        buffer.append(littleEndian: id)
        buffer.append(littleEndian: UInt32(content.count))
        buffer.append(littleEndian: CRC32C.checksum(of: content))
        buffer.append(littleEndian: UInt32(0))
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: $0) }
        buffer.append(littleEndian: crc)
        buffer.append(content)
        return buffer.copyBytes()
    }

    /// The content of a dictionary file, checked whole, or why it cannot be used.
    package static func decode(_ bytes: UnsafeRawBufferPointer, expectedID: UInt32) -> Result<UnsafeRawBufferPointer, CorruptionReason> {
        guard bytes.count >= headerLength else {
            return .failure(.init("the file is \(bytes.count) bytes, shorter than the \(headerLength)-byte header"))
        }
        guard bytes.prefix(8).elementsEqual(magic) else { return .failure(.init("bad magic number (not a Cask dictionary)")) }
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<28]))
        guard crc == bytes.readLittleEndian(at: 28, as: UInt32.self) else { return .failure(.init("header checksum mismatch")) }
        let fileVersion = bytes.readLittleEndian(at: 8, as: UInt16.self)
        guard fileVersion == version else { return .failure(.init("dictionary format version \(fileVersion) (this Cask reads version 1)")) }
        let length = bytes.readLittleEndian(at: 10, as: UInt16.self)
        guard length == UInt16(headerLength) else { return .failure(.init("header length \(length), not \(headerLength)")) }
        let id = bytes.readLittleEndian(at: 12, as: UInt32.self)
        guard id == expectedID else { return .failure(.init("the header names dictionary \(id), the file name \(expectedID)")) }
        let contentLength = Int(bytes.readLittleEndian(at: 16, as: UInt32.self))
        guard (1...maxContentLength).contains(contentLength) else {
            return .failure(.init("content length \(contentLength) outside 1...\(maxContentLength)"))
        }
        guard bytes.count == headerLength + contentLength else {
            return .failure(.init("the file is \(bytes.count) bytes; its header says \(headerLength + contentLength)"))
        }
        let content = UnsafeRawBufferPointer(rebasing: bytes[headerLength...])
        guard CRC32C.checksum(of: content) == bytes.readLittleEndian(at: 20, as: UInt32.self) else {
            return .failure(.init("content checksum mismatch"))
        }
        return .success(content)
    }

    /// Why a dictionary file cannot be used, as a sentence.
    package struct CorruptionReason: Error, Equatable, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }
}
