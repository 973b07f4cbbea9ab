/// One record as a hint file lists it: enough to index the record without reading its value.
package struct HintEntry {
    package var offset: Int64
    package var type: RecordType
    package var flags: UInt8
    package var seq: UInt64
    package var recordLength: Int
    package var valueLength: Int
    package var expiresAt: UInt64?
    /// Valid only during the callback that receives the entry.
    package var key: UnsafeRawBufferPointer
}

/// Hint files: a compact, checksummed list of every record in a segment (FORMAT.md, "Hint files").
///
/// ```
/// header (48 bytes)
///  0  8 bytes magic "CASKHNT\0"
///  8  u16     format version (1)
/// 10  u16     header length (48)
/// 12  u32     block count
/// 16  u64     segment id
/// 24  u64     covered length: the segment bytes the hint describes (header + records)
/// 32  u64     entry count
/// 40  u32     reserved, zero
/// 44  u32     crc32c of bytes 0 ..< 44
/// blocks, each: u32 raw length (<= 1 MiB), u32 stored length, u32 codec (0 raw, 1 lz4),
///               u32 crc32c of the stored bytes, then the stored bytes
/// entries, packed in the raw bytes of the blocks, never split across blocks:
///   u8 type, u8 flags, varint seq, varint record length, varint value length, varint key length,
///   [u64 expiresAt when flags has bit 1], key bytes
/// ```
/// Records are contiguous, so entry offsets are implied: the first record starts right after the
/// segment header, each next one where the previous ends, and the last ends at the covered length.
package enum HintFile {
    package static let magic: [UInt8] = Array("CASKHNT".utf8) + [0]
    package static let headerLength = 48
    package static let blockHeaderLength = 16
    package static let maxBlockLength = 1 << 20
    static let maxEntryLength = 1 + 1 + 10 + 5 + 5 + 3 + 8 + Limits.maxKeyLength

    /// Builds a hint file incrementally as a segment is scanned.
    package struct Encoder: ~Copyable {
        private let segmentID: UInt64
        private var raw = ByteBuffer(capacity: 64 << 10)
        private var output = ByteBuffer(capacity: 64 << 10)
        private var blocks: UInt32 = 0
        private var entries: UInt64 = 0
        private var coveredLength: Int64
        private let compressor = LZ4Compressor()

        package init(segmentID: UInt64) {
            self.segmentID = segmentID
            coveredLength = Int64(SegmentHeader.length)
            output.count = HintFile.headerLength  // header written by `finish`
        }

        /// Adds the record that starts at the current covered length.
        package mutating func add(_ header: RecordHeader, key: UnsafeRawBufferPointer) {
            if raw.count + HintFile.maxEntryLength > HintFile.maxBlockLength { flushBlock() }
            raw.append(byte: header.type.rawValue)
            raw.append(byte: header.flags)
            raw.append(varint: header.seq)
            raw.append(varint: UInt64(header.recordLength))
            raw.append(varint: UInt64(header.valueLength))
            raw.append(varint: UInt64(key.count))
            if let expiresAt = header.expiresAt { raw.append(littleEndian: expiresAt) }
            raw.append(key)
            entries += 1
            coveredLength += Int64(header.recordLength)
        }

        private mutating func flushBlock() {
            guard raw.count > 0 else { return }
            let start = output.count
            output.append(littleEndian: UInt32(raw.count))
            output.append(littleEndian: UInt32(0))  // stored length, set below
            output.append(littleEndian: UInt32(0))  // codec, set below
            output.append(littleEndian: UInt32(0))  // crc, set below
            var stored = 0
            let limit = raw.count - raw.count / 8
            raw.withUnsafeBytes { source in
                output.appendWithUnsafeSpace(limit) { space in
                    stored = compressor.compress(source, into: space) ?? 0
                    return stored
                }
            }
            let codec: UInt32 = stored > 0 ? 1 : 0
            if stored == 0 {
                raw.withUnsafeBytes { output.append($0) }
                stored = raw.count
            }
            let crc = output.withUnsafeBytes {
                CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: $0[(start + HintFile.blockHeaderLength)...]))
            }
            output.set(littleEndian: UInt32(stored), at: start + 4)
            output.set(littleEndian: codec, at: start + 8)
            output.set(littleEndian: crc, at: start + 12)
            blocks += 1
            raw.count = 0
        }

        /// The complete hint file bytes.
        package consuming func finish() -> [UInt8] {
            flushBlock()
            var header = ByteBuffer(capacity: HintFile.headerLength)
            HintFile.magic.withUnsafeBytes { header.append($0) }
            header.append(littleEndian: UInt16(1))
            header.append(littleEndian: UInt16(HintFile.headerLength))
            header.append(littleEndian: blocks)
            header.append(littleEndian: segmentID)
            header.append(littleEndian: UInt64(coveredLength))
            header.append(littleEndian: entries)
            header.append(littleEndian: UInt32(0))
            let crc = header.withUnsafeBytes { CRC32C.checksum(of: $0) }
            header.append(littleEndian: crc)
            var bytes = output.copyBytes()
            header.withUnsafeBytes { headerBytes in
                for index in 0..<HintFile.headerLength { bytes[index] = headerBytes[index] }
            }
            return bytes
        }
    }

    package struct Summary: Equatable {
        package var segmentID: UInt64
        package var coveredLength: Int64
        package var entryCount: UInt64
    }

    package enum Outcome {
        /// The hint failed validation; `body` was not called. Scan the segment instead.
        case invalid
        /// Every entry was passed to `body`.
        case applied(Summary)
        /// The header and every block checksum were valid, but an entry inside did not parse, after
        /// `body` had seen some entries. A damaged block raw length (no checksum covers it) gets
        /// here, as do a writer bug or a crafted file; the caller must discard what it applied,
        /// report the hint as invalid and scan the segment.
        case inconsistent
    }

    /// What a hint file's 48-byte header declares, when its magic, version, length and checksum
    /// hold (its blocks unchecked): enough to size an index, or to see that the hint describes more
    /// bytes than its segment now holds.
    package static func declaredSummary(_ bytes: UnsafeRawBufferPointer) -> Summary? {
        guard bytes.count >= headerLength, bytes.prefix(8).elementsEqual(magic),
              bytes.readLittleEndian(at: 8, as: UInt16.self) == 1,
              bytes.readLittleEndian(at: 10, as: UInt16.self) == UInt16(headerLength),
              CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<44])) == bytes.readLittleEndian(at: 44, as: UInt32.self)
        else { return nil }
        let covered = bytes.readLittleEndian(at: 24, as: UInt64.self)
        return Summary(
            segmentID: bytes.readLittleEndian(at: 16, as: UInt64.self), coveredLength: Int64(clamping: covered),
            entryCount: bytes.readLittleEndian(at: 32, as: UInt64.self))
    }

    /// Validates a whole hint file, then calls `body` for each entry, in record order.
    /// Returns `nil` without calling `body` when anything is inconsistent (including a covered
    /// length over `segmentLength`). Decodes the file twice; recovery uses the faster ``apply``.
    package static func forEachEntry(
        in bytes: UnsafeRawBufferPointer, segmentID: UInt64, segmentLength: Int64, _ body: (HintEntry) -> Void
    ) -> Summary? {
        guard let summary = walk(bytes, segmentID: segmentID, checksums: true, decode: true, { _ in }),
              summary.coveredLength <= segmentLength else { return nil }
        return walk(bytes, segmentID: segmentID, checksums: true, decode: true, body)
    }

    /// Validates a hint file's header and block checksums, then decodes its blocks once, calling
    /// `body` for each entry in record order. A hint that claims to cover more than `segmentLength`
    /// bytes is invalid. Cost: one checksum pass, one decompression and parse of each block.
    package static func apply(
        _ bytes: UnsafeRawBufferPointer, segmentID: UInt64, segmentLength: Int64, _ body: (HintEntry) -> Void
    ) -> Outcome {
        guard let summary = walk(bytes, segmentID: segmentID, checksums: true, decode: false, { _ in }),
              summary.coveredLength <= segmentLength else { return .invalid }
        guard let applied = walk(bytes, segmentID: segmentID, checksums: false, decode: true, body) else { return .inconsistent }
        return .applied(applied)
    }

    /// The header's summary, after checking the header and every block's framing, and (`checksums`)
    /// every block's checksum; with `decode`, also decodes every entry (calling `body`) and checks
    /// the entry count and offsets.
    private static func walk(
        _ bytes: UnsafeRawBufferPointer, segmentID: UInt64, checksums: Bool, decode: Bool, _ body: (HintEntry) -> Void
    ) -> Summary? {
        guard bytes.count >= headerLength, bytes.prefix(8).elementsEqual(magic),
              bytes.readLittleEndian(at: 8, as: UInt16.self) == 1,
              bytes.readLittleEndian(at: 10, as: UInt16.self) == UInt16(headerLength),
              CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<44])) == bytes.readLittleEndian(at: 44, as: UInt32.self),
              bytes.readLittleEndian(at: 16, as: UInt64.self) == segmentID
        else { return nil }
        let blockCount = Int(bytes.readLittleEndian(at: 12, as: UInt32.self))
        let summary = Summary(
            segmentID: segmentID,
            coveredLength: Int64(bitPattern: bytes.readLittleEndian(at: 24, as: UInt64.self)),
            entryCount: bytes.readLittleEndian(at: 32, as: UInt64.self))
        var position = headerLength
        var offset = Int64(SegmentHeader.length)
        var entries: UInt64 = 0
        var raw = ByteBuffer(capacity: 0)
        for _ in 0..<blockCount {
            guard bytes.count - position >= blockHeaderLength else { return nil }
            let rawLength = Int(bytes.readLittleEndian(at: position, as: UInt32.self))
            let storedLength = Int(bytes.readLittleEndian(at: position + 4, as: UInt32.self))
            let codec = bytes.readLittleEndian(at: position + 8, as: UInt32.self)
            let crc = bytes.readLittleEndian(at: position + 12, as: UInt32.self)
            position += blockHeaderLength
            guard rawLength > 0, rawLength <= maxBlockLength, storedLength > 0, storedLength <= bytes.count - position,
                  codec <= 1, codec == 1 || storedLength == rawLength
            else { return nil }
            let stored = UnsafeRawBufferPointer(rebasing: bytes[position..<(position + storedLength)])
            position += storedLength
            if checksums {
                guard CRC32C.checksum(of: stored) == crc else { return nil }
            }
            if !decode { continue }
            let ok: Bool
            if codec == 1 {
                raw.count = 0
                var decoded = false
                raw.appendWithUnsafeSpace(rawLength) { space in
                    decoded = LZ4Decompressor.decompress(stored, into: space)
                    return decoded ? rawLength : 0
                }
                guard decoded else { return nil }
                ok = raw.withUnsafeBytes { parseEntries($0, offset: &offset, count: &entries, body) }
            } else {
                ok = parseEntries(stored, offset: &offset, count: &entries, body)
            }
            guard ok else { return nil }
        }
        guard position == bytes.count else { return nil }
        guard !decode || (entries == summary.entryCount && offset == summary.coveredLength) else { return nil }
        return summary
    }

    /// Whether a record with these fields could have exactly `recordLength` bytes (FORMAT.md, "Hint
    /// files"): a hint must not point the index at offsets no such record could occupy.
    private static func isPlausible(type: RecordType, flags: UInt8, seq: UInt64, recordLength: Int, valueLength: Int, keyLength: Int) -> Bool {
        if RecordHeader.shapeProblem(type: type, flags: flags, keyLength: keyLength, valueLength: valueLength) != nil { return false }
        let fixed = 6 + Varint.size(of: seq) + Varint.size(of: UInt64(keyLength)) + Varint.size(of: UInt64(valueLength))
            + (flags & RecordFlags.expires != 0 ? 8 : 0) + keyLength
        guard flags & RecordFlags.lz4 != 0 else { return recordLength == fixed + valueLength }
        // Compressed: a stored-length varint, then 1 ... compressBound(valueLength) payload bytes.
        let bound = LZ4Compressor.bound(valueLength)
        return recordLength - fixed >= 2 && recordLength - fixed <= Varint.size(of: UInt64(bound)) + bound
    }

    private static func parseEntries(
        _ block: UnsafeRawBufferPointer, offset: inout Int64, count: inout UInt64, _ body: (HintEntry) -> Void
    ) -> Bool {
        var position = 0
        while position < block.count {
            guard block.count - position >= 2, let type = RecordType(rawValue: block[position]) else { return false }
            let flags = block[position + 1]
            guard flags & ~RecordFlags.known == 0, flags & RecordFlags.dictionary == 0 || flags & RecordFlags.lz4 != 0 else { return false }
            position += 2
            guard let seq = Varint.read(block, at: &position),
                  let recordLength = Varint.read(block, at: &position), recordLength <= UInt64(Limits.maxRecordLength),
                  let valueLength = Varint.read(block, at: &position), valueLength <= UInt64(Limits.maxValueLength),
                  let keyLength = Varint.read(block, at: &position), keyLength >= 1, keyLength <= UInt64(Limits.maxKeyLength)
            else { return false }
            guard seq >= 1, seq <= Limits.maxSeq,
                  isPlausible(type: type, flags: flags, seq: seq, recordLength: Int(recordLength),
                              valueLength: Int(valueLength), keyLength: Int(keyLength))
            else { return false }
            var expiresAt: UInt64?
            if flags & RecordFlags.expires != 0 {
                guard block.count - position >= 8 else { return false }
                expiresAt = block.readLittleEndian(at: position, as: UInt64.self)
                position += 8
            }
            guard block.count - position >= Int(keyLength) else { return false }
            let key = UnsafeRawBufferPointer(rebasing: block[position..<(position + Int(keyLength))])
            position += Int(keyLength)
            body(HintEntry(offset: offset, type: type, flags: flags, seq: seq, recordLength: Int(recordLength), valueLength: Int(valueLength), expiresAt: expiresAt, key: key))
            offset += Int64(recordLength)
            count += 1
        }
        return true
    }
}
