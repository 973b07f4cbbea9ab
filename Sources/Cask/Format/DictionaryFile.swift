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
/// 24  u32      measured ratio: payload bytes per 65,536 value bytes when it was chosen; 0 unknown
/// 28  u32      crc32c of bytes 0 ..< 28
/// 32           content; the file ends right after it
/// ```
///
/// An encrypted store's dictionary files are version 2 (FORMAT.md, "Encryption"):
///
/// ```
///  0  8 bytes  magic "CASKDCT\0"
///  8  u16      format version (2)
/// 10  u16      header length (64)
/// 12  u32      dictionary id
/// 16  u32      content length, 1 ... 65,536 (before sealing)
/// 20  u32      measured ratio
/// 24  16 bytes store id
/// 40  16 bytes salt
/// 56  u32      crc32c of the sealed content (content length + 16 bytes)
/// 60  u32      crc32c of bytes 0 ..< 60
/// 64           the content sealed as message 0 of the file's cipher (bytes 0 ..< 56 as associated
///              data), then its 16-byte tag; the file ends right after it
/// ```
package enum DictionaryFile {
    package static let magic: [UInt8] = Array("CASKDCT".utf8) + [0]
    package static let headerLength = 32
    package static let version: UInt16 = 1
    /// The header of version 2 (encrypted).
    package static let encryptedHeaderLength = 64
    package static let encryptedVersion: UInt16 = 2
    /// LZ4 refers back at most 64 KiB, so no dictionary needs more content than this.
    package static let maxContentLength = 65_536

    /// The whole file for `content` (1 ... ``maxContentLength`` bytes) under `id`; `ratio`: the
    /// payload bytes per value byte it gave on the samples it was measured on (nil: unknown).
    package static func encode(id: UInt32, content: UnsafeRawBufferPointer, ratio: Double? = nil) -> [UInt8] {
        precondition((1...maxContentLength).contains(content.count) && id >= 1)
        var buffer = ByteBuffer(capacity: headerLength + content.count)
        magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: version)
        buffer.append(littleEndian: UInt16(headerLength))
        buffer.append(littleEndian: id)
        buffer.append(littleEndian: UInt32(content.count))
        buffer.append(littleEndian: CRC32C.checksum(of: content))
        buffer.append(littleEndian: encodedRatio(ratio))
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: $0) }
        buffer.append(littleEndian: crc)
        buffer.append(content)
        return buffer.copyBytes()
    }

    /// The whole encrypted file (version 2) for `content` under `id`, sealed with a new salt for the
    /// store `encryption`. Returns the file and its salt, which segments that name it repeat.
    package static func encode(
        id: UInt32, content: UnsafeRawBufferPointer, ratio: Double?, encryption: StoreEncryption
    ) -> (file: [UInt8], salt: [UInt8]) {
        precondition((1...maxContentLength).contains(content.count) && id >= 1)
        let (salt, cipher) = encryption.newCipher()
        var buffer = ByteBuffer(capacity: encryptedHeaderLength + content.count + FileCipher.tagLength)
        magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: encryptedVersion)
        buffer.append(littleEndian: UInt16(encryptedHeaderLength))
        buffer.append(littleEndian: id)
        buffer.append(littleEndian: UInt32(content.count))
        buffer.append(littleEndian: encodedRatio(ratio))
        encryption.storeID.withUnsafeBytes { buffer.append($0) }
        salt.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: UInt32(0))  // the sealed content's crc, below
        buffer.append(littleEndian: UInt32(0))  // the header's crc, below
        buffer.append(content)
        buffer.reserve(FileCipher.tagLength)
        buffer.withUnsafeMutableCapacity { space in
            let base = space.baseAddress!
            cipher.seal(
                UnsafeMutableRawBufferPointer(start: base + encryptedHeaderLength, count: content.count),
                associatedData: UnsafeRawBufferPointer(start: base, count: 56), number: 0, tag: base + encryptedHeaderLength + content.count)
        }
        buffer.count += FileCipher.tagLength
        let sealedCRC = buffer.withUnsafeBytes { CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: $0[encryptedHeaderLength...])) }
        buffer.set(littleEndian: sealedCRC, at: 56)
        let headerCRC = buffer.withUnsafeBytes { CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: $0[0..<60])) }
        buffer.set(littleEndian: headerCRC, at: 60)
        return (buffer.copyBytes(), salt)
    }

    private static func encodedRatio(_ ratio: Double?) -> UInt32 {
        ratio.map { UInt32(min(max($0, 0), 65_535.0 / 65_536) * 65_536 + 0.5) } ?? 0
    }

    /// The ratio a dictionary file records (nil: unknown). Read only from a file ``decode(_:expectedID:encryption:)`` accepted.
    package static func ratio(_ bytes: UnsafeRawBufferPointer) -> Double? {
        let encrypted = bytes.readLittleEndian(at: 8, as: UInt16.self) == encryptedVersion
        let stored = bytes.readLittleEndian(at: encrypted ? 20 : 24, as: UInt32.self)
        return stored == 0 ? nil : Double(stored) / 65_536
    }

    /// A dictionary file's content and, encrypted, its salt.
    package struct Decoded {
        package var content: [UInt8]
        package var salt: [UInt8]?
    }

    /// The content of a dictionary file, checked whole (and opened, in an encrypted store: `encryption`),
    /// or why it cannot be used.
    package static func decode(_ bytes: UnsafeRawBufferPointer, expectedID: UInt32, encryption: StoreEncryption?) -> Result<Decoded, CorruptionReason> {
        guard bytes.count >= headerLength else {
            return .failure(.init("the file is \(bytes.count) bytes, shorter than the \(headerLength)-byte header"))
        }
        guard bytes.prefix(8).elementsEqual(magic) else { return .failure(.init("bad magic number (not a Cask dictionary)")) }
        let fileVersion = bytes.readLittleEndian(at: 8, as: UInt16.self)
        if fileVersion == encryptedVersion { return decodeEncrypted(bytes, expectedID: expectedID, encryption: encryption) }
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<28]))
        guard crc == bytes.readLittleEndian(at: 28, as: UInt32.self) else { return .failure(.init("header checksum mismatch")) }
        guard fileVersion == version else { return .failure(.init("dictionary format version \(fileVersion) (this Cask reads versions 1 and 2)")) }
        guard encryption == nil else { return .failure(.init("the dictionary is not encrypted, in an encrypted store")) }
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
        return .success(Decoded(content: Array(content), salt: nil))
    }

    private static func decodeEncrypted(_ bytes: UnsafeRawBufferPointer, expectedID: UInt32, encryption: StoreEncryption?) -> Result<Decoded, CorruptionReason> {
        guard bytes.count >= encryptedHeaderLength else {
            return .failure(.init("the file is \(bytes.count) bytes, shorter than the \(encryptedHeaderLength)-byte header"))
        }
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<60]))
        guard crc == bytes.readLittleEndian(at: 60, as: UInt32.self) else { return .failure(.init("header checksum mismatch")) }
        let length = bytes.readLittleEndian(at: 10, as: UInt16.self)
        guard length == UInt16(encryptedHeaderLength) else { return .failure(.init("header length \(length), not \(encryptedHeaderLength)")) }
        guard let encryption else { return .failure(.init("the dictionary is encrypted, and no key was given")) }
        let id = bytes.readLittleEndian(at: 12, as: UInt32.self)
        guard id == expectedID else { return .failure(.init("the header names dictionary \(id), the file name \(expectedID)")) }
        let contentLength = Int(bytes.readLittleEndian(at: 16, as: UInt32.self))
        guard (1...maxContentLength).contains(contentLength) else {
            return .failure(.init("content length \(contentLength) outside 1...\(maxContentLength)"))
        }
        guard bytes.count == encryptedHeaderLength + contentLength + FileCipher.tagLength else {
            return .failure(.init("the file is \(bytes.count) bytes; its header says \(encryptedHeaderLength + contentLength + FileCipher.tagLength)"))
        }
        let sealed = UnsafeRawBufferPointer(rebasing: bytes[encryptedHeaderLength...])
        guard CRC32C.checksum(of: sealed) == bytes.readLittleEndian(at: 56, as: UInt32.self) else {
            return .failure(.init("content checksum mismatch"))
        }
        guard encryption.storeID.elementsEqual(bytes[24..<40]) else { return .failure(.init("the dictionary is another store's (another store id)")) }
        let salt = Array(bytes[40..<56])
        let cipher = encryption.cipher(salt: salt)
        var content = [UInt8](repeating: 0, count: contentLength)
        let authentic = content.withUnsafeMutableBytes { out in
            cipher.open(
                UnsafeRawBufferPointer(rebasing: sealed[..<(sealed.startIndex + contentLength)]), tag: sealed.baseAddress! + contentLength,
                associatedData: UnsafeRawBufferPointer(rebasing: bytes[0..<56]), number: 0, into: out.baseAddress!)
        }
        guard authentic else { return .failure(.init("its tag does not hold (altered, or sealed under another key)")) }
        return .success(Decoded(content: content, salt: salt))
    }

    /// Why a dictionary file cannot be used, as a sentence.
    package struct CorruptionReason: Error, Equatable, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }
}
