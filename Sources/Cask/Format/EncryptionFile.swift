/// The `ENCRYPTION` file of an encrypted store: which algorithm seals its files, the store's id, and
/// a check of the key. See FORMAT.md, "Encryption".
///
/// ```
///  0  8 bytes  magic "CASKENC\0"
///  8  u16      format version (1)
/// 10  u16      header length (68): the whole file
/// 12  u16      algorithm: 1 AES-256-GCM, 2 XChaCha20-Poly1305
/// 14  u16      reserved, zero
/// 16  16 bytes store id (random)
/// 32  16 bytes salt (random)
/// 48  16 bytes key check: the tag that authenticates bytes 0 ..< 48 as message 0 of the file's cipher
/// 64  u32      crc32c of bytes 0 ..< 64
/// ```
///
/// Its checksum tells damage from a wrong key: a file whose checksum holds and whose key check
/// does not was written under another key (or forged).
package enum EncryptionFile {
    package static let fileName = "ENCRYPTION"
    package static let magic: [UInt8] = Array("CASKENC".utf8) + [0]
    package static let version: UInt16 = 1
    package static let length = 68
    package static let storeIDLength = 16

    /// The file of a new store: `algorithm`, a new random store id, the key check under `key`.
    package static func encode(key: EncryptionKey, algorithm: EncryptionAlgorithm, storeID: [UInt8]) -> [UInt8] {
        let salt = FileCipher.randomSalt()
        let cipher = salt.withUnsafeBytes { FileCipher(algorithm: algorithm, key: key.storage, salt: $0) }
        var buffer = ByteBuffer(capacity: length)
        magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: version)
        buffer.append(littleEndian: UInt16(length))
        buffer.append(littleEndian: algorithm.rawValue)
        buffer.append(littleEndian: UInt16(0))
        storeID.withUnsafeBytes { buffer.append($0) }
        salt.withUnsafeBytes { buffer.append($0) }
        let check = buffer.withUnsafeBytes { cipher.tag(authenticating: $0, number: 0) }
        check.withUnsafeBytes { buffer.append($0) }
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: $0) }
        buffer.append(littleEndian: crc)
        return buffer.copyBytes()
    }

    /// What an `ENCRYPTION` file says, checked (its key check only by ``open(_:key:)``).
    package struct Contents: Equatable {
        package var algorithm: EncryptionAlgorithm
        package var storeID: [UInt8]
        package var salt: [UInt8]
        package var keyCheck: [UInt8]
    }

    /// Why an `ENCRYPTION` file cannot be used.
    package enum Problem: Error, Equatable {
        /// Not a valid file (its checksum, length or fields): damage.
        case damaged(String)
        /// Valid, with a version or algorithm this Cask does not know.
        case unsupported(String)
    }

    /// The file's fields, checked (all but the key check, which needs the key).
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<Contents, Problem> {
        guard bytes.count == length else {
            return .failure(.damaged("the file is \(bytes.count) bytes, not \(length)"))
        }
        guard bytes.prefix(8).elementsEqual(magic) else { return .failure(.damaged("bad magic number (not a Cask ENCRYPTION file)")) }
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<64]))
        guard crc == bytes.readLittleEndian(at: 64, as: UInt32.self) else { return .failure(.damaged("checksum mismatch")) }
        let fileVersion = bytes.readLittleEndian(at: 8, as: UInt16.self)
        guard fileVersion == version else { return .failure(.unsupported("format version \(fileVersion) (this Cask reads version 1)")) }
        guard bytes.readLittleEndian(at: 10, as: UInt16.self) == UInt16(length) else { return .failure(.damaged("header length is not \(length)")) }
        let code = bytes.readLittleEndian(at: 12, as: UInt16.self)
        guard let algorithm = EncryptionAlgorithm(rawValue: code) else { return .failure(.unsupported("algorithm \(code) (this Cask knows 1 and 2)")) }
        return .success(Contents(
            algorithm: algorithm, storeID: Array(bytes[16..<32]), salt: Array(bytes[32..<48]), keyCheck: Array(bytes[48..<64])))
    }

    /// The store's encryption when `key` is the key the file was written with; nil when it is not.
    package static func open(_ bytes: UnsafeRawBufferPointer, contents: Contents, key: EncryptionKey) -> StoreEncryption? {
        let encryption = StoreEncryption(key: key, algorithm: contents.algorithm, storeID: contents.storeID, identityFile: Array(bytes))
        let cipher = encryption.cipher(salt: contents.salt)
        let holds = contents.keyCheck.withUnsafeBytes { check in
            cipher.verify(tag: check, authenticating: UnsafeRawBufferPointer(rebasing: bytes[0..<48]), number: 0)
        }
        return holds ? encryption : nil
    }
}
