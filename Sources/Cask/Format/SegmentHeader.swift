/// The 40-byte header at the start of every segment file. See FORMAT.md, "Segment files".
///
/// ```
///  0  8 bytes  magic "CASKSEG\0"
///  8  u16      format version: 1, or 2 for a segment whose records may use a dictionary
/// 10  u16      header length (40)
/// 12  u32      version 1: reserved, zero; version 2: crc32c of the dictionary's content
/// 16  u64      segment id (also in the file name)
/// 24  u64      base sequence: every record written to this segment after creation has seq >= base
/// 32  u32      version 1: reserved, zero; version 2: the dictionary id, 1 ... 4,294,967,294
/// 36  u32      crc32c of bytes 0 ..< 36
/// ```
package struct SegmentHeader: Equatable, Sendable {
    package static let magic: [UInt8] = Array("CASKSEG".utf8) + [0]
    package static let length = 40
    /// The version of a segment without a dictionary; Cask still writes it for those.
    package static let versionWithoutDictionary: UInt16 = 1
    /// The version of a segment that names a dictionary.
    package static let versionWithDictionary: UInt16 = 2

    package var segmentID: UInt64
    package var baseSeq: UInt64
    /// The dictionary the segment's dictionary-compressed records need (``RecordFlags/dictionary``);
    /// 0 for none.
    package var dictionaryID: UInt32
    /// The crc32c of that dictionary's content, so that another dictionary under the same id is
    /// never used in its place (it would expand records into other bytes); 0 without a dictionary.
    package var dictionaryChecksum: UInt32

    package init(segmentID: UInt64, baseSeq: UInt64, dictionaryID: UInt32 = 0, dictionaryChecksum: UInt32 = 0) {
        self.segmentID = segmentID
        self.baseSeq = baseSeq
        self.dictionaryID = dictionaryID
        self.dictionaryChecksum = dictionaryID == 0 ? 0 : dictionaryChecksum
    }

    /// The version this header is written with.
    package var version: UInt16 { dictionaryID == 0 ? Self.versionWithoutDictionary : Self.versionWithDictionary }

    package func encoded() -> [UInt8] {
        var buffer = ByteBuffer(capacity: Self.length)
        Self.magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: version)
        buffer.append(littleEndian: UInt16(Self.length))
        buffer.append(littleEndian: dictionaryChecksum)
        buffer.append(littleEndian: segmentID)
        buffer.append(littleEndian: baseSeq)
        buffer.append(littleEndian: dictionaryID)
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
        /// A version 2 header whose dictionary id is 0 or above the id limit.
        case dictionaryIDOutOfRange(UInt32)
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, Problem> {
        guard bytes.count >= length else { return .failure(.tooShort) }
        guard bytes.prefix(8).elementsEqual(magic) else { return .failure(.badMagic) }
        let version = bytes.readLittleEndian(at: 8, as: UInt16.self)
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<36]))
        guard crc == bytes.readLittleEndian(at: 36, as: UInt32.self) else { return .failure(.badChecksum) }
        guard version == versionWithoutDictionary || version == versionWithDictionary else {
            return .failure(.unsupportedVersion(version))
        }
        let headerLength = bytes.readLittleEndian(at: 10, as: UInt16.self)
        guard headerLength == UInt16(length) else { return .failure(.unsupportedHeaderLength(headerLength)) }
        let baseSeq = bytes.readLittleEndian(at: 24, as: UInt64.self)
        guard baseSeq <= Limits.maxSeq else { return .failure(.baseSeqOutOfRange(baseSeq)) }
        var dictionaryID: UInt32 = 0, dictionaryChecksum: UInt32 = 0
        if version == versionWithDictionary {
            dictionaryID = bytes.readLittleEndian(at: 32, as: UInt32.self)
            dictionaryChecksum = bytes.readLittleEndian(at: 12, as: UInt32.self)
            guard dictionaryID >= 1, UInt64(dictionaryID) <= SegmentName.maxID else {
                return .failure(.dictionaryIDOutOfRange(dictionaryID))
            }
        }
        return .success(SegmentHeader(segmentID: bytes.readLittleEndian(at: 16, as: UInt64.self), baseSeq: baseSeq, dictionaryID: dictionaryID,
            dictionaryChecksum: dictionaryChecksum))
    }
}

extension SegmentHeader {
    /// Reads and decodes the header of the segment open as `fd` (through the file-system seam).
    /// Throws only when the read itself fails; a short or invalid header is a `Problem`.
    package static func read(fd: Int32, path: String, fileSystem: any FileSystem) throws(CaskError) -> Result<SegmentHeader, Problem> {
        var bytes = [UInt8](repeating: 0, count: length)
        let count: Int
        do {
            count = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }
        } catch {
            throw CaskError.io(operation: "pread", path: path, errno: error)
        }
        return bytes[0..<count].withUnsafeBytes { decode($0) }
    }
}

extension SegmentHeader.Problem {
    /// A sentence for reports.
    var explanation: String {
        switch self {
        case .tooShort: "the file is shorter than the \(SegmentHeader.length)-byte header"
        case .badMagic: "bad magic number (not a Cask segment)"
        case .unsupportedVersion(let version): "format version \(version) (this Cask reads formats 1 and 2)"
        case .unsupportedHeaderLength(let headerLength):
            "segment header length \(headerLength), not the \(SegmentHeader.length) bytes of formats 1 and 2 (written by another version of Cask?)"
        case .badChecksum: "header checksum mismatch"
        case .baseSeqOutOfRange(let baseSeq): "base seq \(baseSeq) is above \(Limits.maxSeq)"
        case .dictionaryIDOutOfRange(let id): "dictionary id \(id) is outside 1...\(SegmentName.maxID)"
        }
    }
}
