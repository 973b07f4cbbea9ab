/// The 40-byte header at the start of every segment file. See FORMAT.md, "Segment files".
///
/// ```
///  0  8 bytes  magic "CASKSEG\0"
///  8  u16      format version (1)
/// 10  u16      header length (40)
/// 12  u32      reserved, zero
/// 16  u64      segment id (also in the file name)
/// 24  u64      base sequence: every record written to this segment after creation has seq >= base
/// 32  u32      reserved, zero
/// 36  u32      crc32c of bytes 0 ..< 36
/// ```
package struct SegmentHeader: Equatable, Sendable {
    package static let magic: [UInt8] = Array("CASKSEG".utf8) + [0]
    package static let length = 40
    package static let currentVersion: UInt16 = 1

    package var segmentID: UInt64
    package var baseSeq: UInt64

    package init(segmentID: UInt64, baseSeq: UInt64) {
        self.segmentID = segmentID
        self.baseSeq = baseSeq
    }

    package func encoded() -> [UInt8] {
        var buffer = ByteBuffer(capacity: Self.length)
        Self.magic.withUnsafeBytes { buffer.append($0) }
        buffer.append(littleEndian: Self.currentVersion)
        buffer.append(littleEndian: UInt16(Self.length))
        buffer.append(littleEndian: UInt32(0))
        buffer.append(littleEndian: segmentID)
        buffer.append(littleEndian: baseSeq)
        buffer.append(littleEndian: UInt32(0))
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
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, Problem> {
        guard bytes.count >= length else { return .failure(.tooShort) }
        guard bytes.prefix(8).elementsEqual(magic) else { return .failure(.badMagic) }
        let version = bytes.readLittleEndian(at: 8, as: UInt16.self)
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<36]))
        guard crc == bytes.readLittleEndian(at: 36, as: UInt32.self) else { return .failure(.badChecksum) }
        guard version == currentVersion else { return .failure(.unsupportedVersion(version)) }
        let headerLength = bytes.readLittleEndian(at: 10, as: UInt16.self)
        guard headerLength == UInt16(length) else { return .failure(.unsupportedHeaderLength(headerLength)) }
        let baseSeq = bytes.readLittleEndian(at: 24, as: UInt64.self)
        guard baseSeq <= Limits.maxSeq else { return .failure(.baseSeqOutOfRange(baseSeq)) }
        return .success(SegmentHeader(segmentID: bytes.readLittleEndian(at: 16, as: UInt64.self), baseSeq: baseSeq))
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
        case .unsupportedVersion(let version): "format version \(version) (this Cask reads format 1)"
        case .unsupportedHeaderLength(let headerLength):
            "segment header length \(headerLength), not the \(SegmentHeader.length) bytes of format 1 (written by another version of Cask?)"
        case .badChecksum: "header checksum mismatch"
        case .baseSeqOutOfRange(let baseSeq): "base seq \(baseSeq) is above \(Limits.maxSeq)"
        }
    }
}
