/// The header at the start of every segment file: 40 bytes, 46 plus its key prefix's in a segment
/// that names one, or 108 in an encrypted store. See FORMAT.md, "Segment files" and "Encryption".
///
/// ```
///  0  8 bytes  magic "CASKSEG\0"
///  8  u16      format version: 1; 2 for a segment whose records may use a dictionary; 3 encrypted;
///              4 for a segment that names a key prefix (and perhaps a dictionary)
/// 10  u16      header length (40; 108 for version 3; 46 + p for version 4)
/// 12  u32      version 1: reserved, zero; versions 2 and 4: crc32c of the dictionary's content (4: 0 for none);
///              version 3: the algorithm (u16, as in ENCRYPTION) and a reserved u16, zero
/// 16  u64      segment id (also in the file name)
/// 24  u64      base sequence: every record written to this segment after creation has seq >= base
/// 32  u32      version 1: reserved, zero; versions 2 to 4: the dictionary id (versions 3 and 4: 0 for none)
/// 36  u32      versions 1, 2 and 4: crc32c of bytes 0 ..< 36, the end of the header but in version 4
///              (where it makes a Cask that reads formats 1 and 2 refuse the segment as another version)
/// version 4:
/// 40  u16      key prefix length p, 1 ... 255
/// 42  p bytes  the key prefix, which records flagged ``RecordFlags/keyPrefix`` elide
/// 42+p u32     crc32c of bytes 0 ..< 42 + p
/// version 3:
/// 36  u32      reserved, zero
/// 40  16 bytes store id (the store's ENCRYPTION file's)
/// 56  16 bytes salt: the segment's cipher is HChaCha20(store key, salt)
/// 72  16 bytes the dictionary's salt (its file's), zero without one
/// 88  16 bytes tag authenticating bytes 0 ..< 88 as message 0 of the segment's cipher
/// 104 u32      crc32c of bytes 0 ..< 104
/// ```
package struct SegmentHeader: Equatable, Sendable {
    package static let magic: [UInt8] = Array("CASKSEG".utf8) + [0]
    /// The header of versions 1 and 2.
    package static let length = 40
    /// The header of version 3 (encrypted).
    package static let encryptedLength = 108
    /// The longest header: version 4 with the longest key prefix.
    package static let maxLength = 46 + Limits.maxKeyPrefixLength
    /// The version of a segment without a dictionary; Cask still writes it for those.
    package static let versionWithoutDictionary: UInt16 = 1
    /// The version of a segment that names a dictionary.
    package static let versionWithDictionary: UInt16 = 2
    /// The version of every segment of an encrypted store.
    package static let versionEncrypted: UInt16 = 3
    /// The version of a segment that names a key prefix (never in an encrypted store).
    package static let versionWithKeyPrefix: UInt16 = 4

    package var segmentID: UInt64
    package var baseSeq: UInt64
    /// The dictionary the segment's dictionary-compressed records need (``RecordFlags/dictionary``);
    /// 0 for none.
    package var dictionaryID: UInt32
    /// The crc32c of that dictionary's content, so that another dictionary under the same id is
    /// never used in its place (it would expand records into other bytes); 0 without a dictionary,
    /// and in an encrypted segment (whose ``Sealing/dictionarySalt`` names the dictionary file).
    package var dictionaryChecksum: UInt32
    /// How an encrypted segment is sealed; nil for a segment of a store that is not encrypted.
    package var sealing: Sealing?
    /// The bytes the keys of the segment's records flagged ``RecordFlags/keyPrefix`` start with
    /// (they store only the rest): 0 to ``Limits/maxKeyPrefixLength`` bytes, none in an encrypted
    /// segment.
    package var keyPrefix: [UInt8]

    /// The fields of an encrypted segment's header (version 3).
    package struct Sealing: Equatable, Sendable {
        package var algorithm: EncryptionAlgorithm
        package var storeID: [UInt8]
        /// The salt of the segment's cipher.
        package var salt: [UInt8]
        /// The salt of the dictionary file the header names (all zero without one): an encrypted
        /// dictionary file is named by its id and its salt.
        package var dictionarySalt: [UInt8]

        package init(algorithm: EncryptionAlgorithm, storeID: [UInt8], salt: [UInt8], dictionarySalt: [UInt8]?) {
            self.algorithm = algorithm
            self.storeID = storeID
            self.salt = salt
            self.dictionarySalt = dictionarySalt ?? [UInt8](repeating: 0, count: FileCipher.saltLength)
        }
    }

    package init(
        segmentID: UInt64, baseSeq: UInt64, dictionaryID: UInt32 = 0, dictionaryChecksum: UInt32 = 0, sealing: Sealing? = nil,
        keyPrefix: [UInt8] = []
    ) {
        precondition(keyPrefix.count <= Limits.maxKeyPrefixLength && (sealing == nil || keyPrefix.isEmpty), "a key prefix fits its header")
        self.segmentID = segmentID
        self.baseSeq = baseSeq
        self.dictionaryID = dictionaryID
        self.dictionaryChecksum = dictionaryID == 0 || sealing != nil ? 0 : dictionaryChecksum
        self.sealing = sealing
        self.keyPrefix = keyPrefix
    }

    /// The version this header is written with.
    package var version: UInt16 {
        if sealing != nil { return Self.versionEncrypted }
        if !keyPrefix.isEmpty { return Self.versionWithKeyPrefix }
        return dictionaryID == 0 ? Self.versionWithoutDictionary : Self.versionWithDictionary
    }

    /// The header's length, where the segment's first record starts.
    package var byteCount: Int { Self.byteCount(encrypted: sealing != nil, keyPrefixLength: keyPrefix.count) }

    /// The length of a header of an encrypted segment or not, naming a key prefix of `keyPrefixLength` bytes (0: none).
    package static func byteCount(encrypted: Bool, keyPrefixLength: Int) -> Int {
        encrypted ? encryptedLength : keyPrefixLength == 0 ? length : 46 + keyPrefixLength
    }

    /// The header's bytes. An encrypted header (``sealing``) is authenticated with `cipher`, the
    /// segment's (the cipher of its salt).
    package func encoded(cipher: FileCipher? = nil) -> [UInt8] {
        var buffer = ByteBuffer(capacity: byteCount)
        Self.magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: version)
        buffer.append(littleEndian: UInt16(byteCount))
        if let sealing {
            buffer.append(littleEndian: sealing.algorithm.rawValue)
            buffer.append(littleEndian: UInt16(0))
        } else {
            buffer.append(littleEndian: dictionaryChecksum)
        }
        buffer.append(littleEndian: segmentID)
        buffer.append(littleEndian: baseSeq)
        buffer.append(littleEndian: dictionaryID)
        if !keyPrefix.isEmpty {
            let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: $0) }
            buffer.append(littleEndian: crc)
            buffer.append(littleEndian: UInt16(keyPrefix.count))
            keyPrefix.withUnsafeBytes { buffer.append($0) }
        }
        if let sealing {
            precondition(cipher != nil, "an encrypted segment header is authenticated with the segment's cipher")
            buffer.append(littleEndian: UInt32(0))
            sealing.storeID.withUnsafeBytes { buffer.append($0) }
            sealing.salt.withUnsafeBytes { buffer.append($0) }
            sealing.dictionarySalt.withUnsafeBytes { buffer.append($0) }
            let tag = buffer.withUnsafeBytes { cipher!.tag(authenticating: $0, number: 0) }
            tag.withUnsafeBytes { buffer.append($0) }
        }
        let crc = buffer.withUnsafeBytes { CRC32C.checksum(of: $0) }
        buffer.append(littleEndian: crc)
        return buffer.copyBytes()
    }

    package enum Problem: Error, Equatable {
        case tooShort
        case badMagic
        case unsupportedVersion(UInt16)
        /// The right magic, version and checksum, but another header length.
        case unsupportedHeaderLength(UInt16)
        case badChecksum
        /// A valid checksum over a base seq no record could have.
        case baseSeqOutOfRange(UInt64)
        /// A version 2 to 4 header whose dictionary id is above the id limit (0, in version 2).
        case dictionaryIDOutOfRange(UInt32)
        /// A version 4 header with no dictionary id and a dictionary checksum.
        case dictionaryChecksumWithoutDictionary
        /// A version 4 header whose key prefix length is outside 1 ... 255.
        case keyPrefixLengthOutOfRange(UInt16)
        /// A version 3 header with an algorithm this Cask does not know.
        case unknownAlgorithm(UInt16)
        /// An encrypted segment read without the store's key.
        case keyRequired
        /// A segment that is not encrypted, in an encrypted store.
        case notEncrypted
        /// An encrypted segment of another store (its store id is not this store's).
        case otherStore
        /// An encrypted segment sealed with another algorithm than the store's.
        case otherAlgorithm(EncryptionAlgorithm)
        /// An encrypted header whose tag does not hold: altered, or written under another key.
        case notAuthentic
    }

    /// Decodes a header: `bytes` holds the start of the file (at least the header, or the whole
    /// file when it is shorter). An encrypted header is checked against `encryption` (the store's,
    /// nil when the store is not encrypted), and its segment's cipher returned with it.
    package static func decode(_ bytes: UnsafeRawBufferPointer, encryption: StoreEncryption?) -> Result<(SegmentHeader, FileCipher?), Problem> {
        guard bytes.count >= length else { return .failure(.tooShort) }
        guard bytes.prefix(8).elementsEqual(magic) else { return .failure(.badMagic) }
        let version = bytes.readLittleEndian(at: 8, as: UInt16.self)
        if version == versionEncrypted { return decodeEncrypted(bytes, encryption: encryption) }
        // Every version's first checksum is at 36; version 4's key prefix follows it, and a second.
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<36]))
        guard crc == bytes.readLittleEndian(at: 36, as: UInt32.self) else { return .failure(.badChecksum) }
        guard version == versionWithoutDictionary || version == versionWithDictionary || version == versionWithKeyPrefix else {
            return .failure(.unsupportedVersion(version))
        }
        var end = 36, prefixLength = 0
        if version == versionWithKeyPrefix {
            guard bytes.count >= 42 else { return .failure(.tooShort) }
            let declared = bytes.readLittleEndian(at: 40, as: UInt16.self)
            guard declared >= 1, Int(declared) <= Limits.maxKeyPrefixLength else { return .failure(.keyPrefixLengthOutOfRange(declared)) }
            prefixLength = Int(declared)
            end = 42 + prefixLength
            guard bytes.count >= end + 4 else { return .failure(.tooShort) }
            let prefixCRC = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<end]))
            guard prefixCRC == bytes.readLittleEndian(at: end, as: UInt32.self) else { return .failure(.badChecksum) }
        }
        let headerLength = bytes.readLittleEndian(at: 10, as: UInt16.self)
        guard headerLength == UInt16(end + 4) else { return .failure(.unsupportedHeaderLength(headerLength)) }
        let baseSeq = bytes.readLittleEndian(at: 24, as: UInt64.self)
        guard baseSeq <= Limits.maxSeq else { return .failure(.baseSeqOutOfRange(baseSeq)) }
        var dictionaryID: UInt32 = 0, dictionaryChecksum: UInt32 = 0
        if version != versionWithoutDictionary {
            dictionaryID = bytes.readLittleEndian(at: 32, as: UInt32.self)
            dictionaryChecksum = bytes.readLittleEndian(at: 12, as: UInt32.self)
            if version == versionWithKeyPrefix && dictionaryID == 0 {
                guard dictionaryChecksum == 0 else { return .failure(.dictionaryChecksumWithoutDictionary) }
            } else {
                guard dictionaryID >= 1, UInt64(dictionaryID) <= SegmentName.maxID else {
                    return .failure(.dictionaryIDOutOfRange(dictionaryID))
                }
            }
        }
        // A valid header that is not encrypted, in an encrypted store: never read (anyone can write one).
        guard encryption == nil else { return .failure(.notEncrypted) }
        return .success((SegmentHeader(segmentID: bytes.readLittleEndian(at: 16, as: UInt64.self), baseSeq: baseSeq, dictionaryID: dictionaryID,
            dictionaryChecksum: dictionaryChecksum, keyPrefix: prefixLength == 0 ? [] : Array(bytes[42..<(42 + prefixLength)])), nil))
    }

    private static func decodeEncrypted(_ bytes: UnsafeRawBufferPointer, encryption: StoreEncryption?) -> Result<(SegmentHeader, FileCipher?), Problem> {
        guard bytes.count >= encryptedLength else { return .failure(.tooShort) }
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<104]))
        guard crc == bytes.readLittleEndian(at: 104, as: UInt32.self) else { return .failure(.badChecksum) }
        let headerLength = bytes.readLittleEndian(at: 10, as: UInt16.self)
        guard headerLength == UInt16(encryptedLength) else { return .failure(.unsupportedHeaderLength(headerLength)) }
        let code = bytes.readLittleEndian(at: 12, as: UInt16.self)
        guard let algorithm = EncryptionAlgorithm(rawValue: code) else { return .failure(.unknownAlgorithm(code)) }
        guard let encryption else { return .failure(.keyRequired) }
        let sealing = Sealing(
            algorithm: algorithm, storeID: Array(bytes[40..<56]), salt: Array(bytes[56..<72]), dictionarySalt: Array(bytes[72..<88]))
        guard sealing.storeID == encryption.storeID else { return .failure(.otherStore) }
        guard algorithm == encryption.algorithm else { return .failure(.otherAlgorithm(algorithm)) }
        let cipher = encryption.cipher(salt: sealing.salt)
        guard cipher.verify(tag: UnsafeRawBufferPointer(rebasing: bytes[88..<104]), authenticating: UnsafeRawBufferPointer(rebasing: bytes[0..<88]), number: 0)
        else { return .failure(.notAuthentic) }
        // Authentic from here: the fields below were written by a holder of the key.
        let baseSeq = bytes.readLittleEndian(at: 24, as: UInt64.self)
        guard baseSeq <= Limits.maxSeq else { return .failure(.baseSeqOutOfRange(baseSeq)) }
        let dictionaryID = bytes.readLittleEndian(at: 32, as: UInt32.self)
        guard UInt64(dictionaryID) <= SegmentName.maxID else { return .failure(.dictionaryIDOutOfRange(dictionaryID)) }
        let header = SegmentHeader(
            segmentID: bytes.readLittleEndian(at: 16, as: UInt64.self), baseSeq: baseSeq, dictionaryID: dictionaryID, sealing: sealing)
        return .success((header, cipher))
    }
}

extension SegmentHeader {
    /// Reads and decodes the header of the segment open as `fd` (through the file-system seam).
    /// Throws only when the read itself fails; a short or invalid header is a `Problem`.
    package static func read(
        fd: Int32, path: String, encryption: StoreEncryption?, fileSystem: any FileSystem
    ) throws(CaskError) -> Result<(SegmentHeader, FileCipher?), Problem> {
        var bytes = [UInt8](repeating: 0, count: maxLength)
        let count: Int
        do {
            count = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }
        } catch {
            throw CaskError.io(operation: "pread", path: path, errno: error)
        }
        return bytes[0..<count].withUnsafeBytes { decode($0, encryption: encryption) }
    }
}

extension SegmentHeader.Problem {
    /// A sentence for reports.
    var explanation: String {
        switch self {
        case .tooShort: "the file is shorter than its header"
        case .badMagic: "bad magic number (not a Cask segment)"
        case .unsupportedVersion(let version): "format version \(version) (this Cask reads formats 1 to 4)"
        case .unsupportedHeaderLength(let headerLength):
            "segment header length \(headerLength), not the \(SegmentHeader.length) bytes of formats 1 and 2, the \(SegmentHeader.encryptedLength) of format 3 or 46 plus the key prefix's of format 4 (written by another version of Cask?)"
        case .badChecksum: "header checksum mismatch"
        case .baseSeqOutOfRange(let baseSeq): "base seq \(baseSeq) is above \(Limits.maxSeq)"
        case .dictionaryIDOutOfRange(let id): "dictionary id \(id) is outside 1...\(SegmentName.maxID)"
        case .dictionaryChecksumWithoutDictionary: "a dictionary checksum without a dictionary id"
        case .keyPrefixLengthOutOfRange(let length): "key prefix length \(length) is outside 1...\(Limits.maxKeyPrefixLength)"
        case .unknownAlgorithm(let code): "encryption algorithm \(code) (this Cask knows 1 and 2)"
        case .keyRequired: "the segment is encrypted and no key was given"
        case .notEncrypted: "the segment is not encrypted, in an encrypted store: its records are not read"
        case .otherStore: "the segment is another store's (its header names another store id): its records are not read"
        case .otherAlgorithm(let algorithm): "the segment is sealed with \(algorithm), not the store's algorithm: its records are not read"
        case .notAuthentic: "the header's tag does not hold (it was altered, or sealed under another key): its records are not read"
        }
    }
}
