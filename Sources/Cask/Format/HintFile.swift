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
///  8  u16     format version (3; 1 for a hint written before entries were delta-coded)
/// 10  u16     header length (48)
/// 12  u32     block count
/// 16  u64     segment id
/// 24  u64     covered length: the segment bytes the hint describes (header + records)
/// 32  u64     entry count
/// 40  u32     the length p of the key prefix the segment's header names (0 for none): its records
///             start at 46 + p (40 without one)
/// 44  p bytes the key prefix
/// 44+p u32    crc32c of bytes 0 ..< 44 + p (the header is 48 + p bytes)
/// blocks, each: u32 raw length (<= 1 MiB), u32 stored length, u32 codec (0 raw, 1 lz4, 2 zstd),
///               u32 crc32c of the stored bytes, then the stored bytes
/// entries, packed in the raw bytes of the blocks, never split across blocks:
///   u8 type, u8 flags, zigzag varint seq delta, varint record length, varint value length,
///   varint shared, varint suffix length, [u64 expiresAt when flags has bit 1], suffix bytes
///   — the seq delta from the block's entry before (0 before the first), the key as the first
///   `shared` bytes of that entry's key followed by the suffix. Version 1 entries had a plain
///   varint seq and a varint key length followed by the whole key.
/// ```
/// Records are contiguous, so entry offsets are implied: the first record starts right after the
/// segment header, each next one where the previous ends, and the last ends at the covered length.
///
/// An encrypted store's hints are version 4 (2 before delta-coded entries; FORMAT.md, "Encryption"):
/// a 96-byte header that adds the segment's salt (the hint describes that segment and no other), the
/// hint's own salt and a tag authenticating the header; each block's stored bytes are sealed
/// (ciphertext and a 16-byte tag, message `index + 1` of the hint's cipher, its first 12 bytes as
/// associated data).
package enum HintFile {
    package static let magic: [UInt8] = Array("CASKHNT".utf8) + [0]
    /// The header of versions 1 and 3 for a segment without a key prefix (48 + p with one).
    package static let headerLength = 48
    /// The longest header: a plain one with the longest key prefix.
    package static let maxHeaderLength = headerLength + Limits.maxKeyPrefixLength
    /// The header of version 2 (encrypted).
    package static let encryptedHeaderLength = 96
    package static let blockHeaderLength = 16
    package static let maxBlockLength = 1 << 20
    static let maxEntryLength = 1 + 1 + 10 + 5 + 5 + 3 + 3 + 8 + Limits.maxKeyLength
    /// What this version of Cask writes: delta-coded entries, plain and sealed.
    static let writtenVersion: UInt16 = 3
    static let writtenEncryptedVersion: UInt16 = 4

    /// Whether a hint of `version` (1 to 4) is sealed: 2 and 4.
    package static func isEncrypted(version: UInt16) -> Bool { version == 2 || version == 4 }
    /// Whether a hint of `version` (1 to 4) codes each entry against the one before: 3 and 4.
    static func isDeltaCoded(version: UInt16) -> Bool { version >= 3 }

    /// What an encrypted store's hints are sealed and checked with: the store's encryption and the
    /// salt of the segment the hint describes.
    package struct Sealing {
        package var encryption: StoreEncryption
        package var segmentSalt: [UInt8]

        package init(encryption: StoreEncryption, segmentSalt: [UInt8]) {
            self.encryption = encryption
            self.segmentSalt = segmentSalt
        }
    }

    package struct Summary: Equatable {
        package var segmentID: UInt64
        package var coveredLength: Int64
        package var entryCount: UInt64
        /// The key prefix the segment's header names, as the hint holds it (empty: none).
        package var keyPrefix: [UInt8] = []
        /// The hint's header length, where its first block starts.
        package var headerLength = HintFile.headerLength
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

    /// The length of a hint file's header, from its version field (96 sealed, else 48 plus the key
    /// prefix length at 40, which `bytes` must reach); nil for another version or a prefix over 255 bytes.
    private static func headerLength(of bytes: UnsafeRawBufferPointer) -> Int? {
        let version = bytes.readLittleEndian(at: 8, as: UInt16.self)
        guard (1...4).contains(version) else { return nil }
        if isEncrypted(version: version) { return encryptedHeaderLength }
        let keyPrefixLength = bytes.readLittleEndian(at: 40, as: UInt32.self)
        guard keyPrefixLength <= UInt32(Limits.maxKeyPrefixLength) else { return nil }
        return headerLength + Int(keyPrefixLength)
    }

    /// A seq delta as an entry stores it: the difference `seq − previous` (wrapping, read as signed:
    /// a compaction's output holds seqs out of order) with its sign in the low bit.
    static func zigzag(_ difference: UInt64) -> UInt64 {
        let signed = Int64(bitPattern: difference)
        return UInt64(bitPattern: (signed << 1) ^ (signed >> 63))
    }

    /// The signed difference a ``zigzag(_:)`` value stores.
    static func unzigzag(_ stored: UInt64) -> Int64 {
        Int64(bitPattern: (stored >> 1) ^ (0 &- (stored & 1)))
    }

    /// What a hint file's header declares, when its magic, version, length and checksum hold (its
    /// blocks unchecked; an encrypted hint's tag too, with `sealing`): enough to size an index, or to
    /// see that the hint describes more bytes than its segment now holds. `bytes` may be the first
    /// ``maxHeaderLength`` bytes alone.
    package static func declaredSummary(_ bytes: UnsafeRawBufferPointer, sealing: Sealing? = nil) -> Summary? {
        guard bytes.count >= headerLength, bytes.prefix(8).elementsEqual(magic),
              let length = headerLength(of: bytes), bytes.count >= length,
              bytes.readLittleEndian(at: 10, as: UInt16.self) == UInt16(length),
              CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[0..<(length - 4)])) == bytes.readLittleEndian(at: length - 4, as: UInt32.self)
        else { return nil }
        // Told by the version, not the length: a plain hint of a 48-byte key prefix is 96 bytes too.
        let encrypted = isEncrypted(version: bytes.readLittleEndian(at: 8, as: UInt16.self))
        if encrypted, let sealing {
            guard sealing.segmentSalt.elementsEqual(bytes[40..<56]) else { return nil }
            let cipher = sealing.encryption.cipher(salt: UnsafeRawBufferPointer(rebasing: bytes[56..<72]))
            guard cipher.verify(tag: UnsafeRawBufferPointer(rebasing: bytes[72..<88]), authenticating: UnsafeRawBufferPointer(rebasing: bytes[0..<72]), number: 0)
            else { return nil }
        }
        let covered = bytes.readLittleEndian(at: 24, as: UInt64.self)
        // An encrypted segment names no key prefix: the u32 before the checksum is 0.
        if encrypted, bytes.readLittleEndian(at: length - 8, as: UInt32.self) != 0 { return nil }
        return Summary(
            segmentID: bytes.readLittleEndian(at: 16, as: UInt64.self), coveredLength: Int64(clamping: covered),
            entryCount: bytes.readLittleEndian(at: 32, as: UInt64.self),
            keyPrefix: encrypted ? [] : Array(bytes[44..<(length - 4)]), headerLength: length)
    }

    /// Validates a whole hint file, then calls `body` for each entry, in record order.
    /// Returns `nil` without calling `body` when anything is inconsistent (including a covered
    /// length over `segmentLength`). Decodes the file twice; recovery uses the faster ``apply``.
    /// `sealing`: an encrypted store's (its hints must be version 2 or 4, sealed for this segment);
    /// nil for a store that is not encrypted (its hints must be version 1 or 3). `keyPrefix`: the key
    /// prefix the segment's header names, nil when the header is damaged (a hint holding another is
    /// invalid; behind a damaged header the hint's is taken).
    package static func forEachEntry(
        in bytes: UnsafeRawBufferPointer, segmentID: UInt64, segmentLength: Int64, sealing: Sealing?, keyPrefix: [UInt8]?,
        _ body: (HintEntry) -> Void
    ) -> Summary? {
        guard let summary = walk(bytes, segmentID: segmentID, sealing: sealing, keyPrefix: keyPrefix, checksums: true, decode: true, { _ in }),
              summary.coveredLength <= segmentLength else { return nil }
        return walk(bytes, segmentID: segmentID, sealing: sealing, keyPrefix: keyPrefix, checksums: true, decode: true, body)
    }

    /// Validates a hint file's header and block checksums, then decodes its blocks once, calling
    /// `body` for each entry in record order. A hint that claims to cover more than `segmentLength`
    /// bytes is invalid. Cost: one checksum pass, one decompression and parse of each block (and
    /// with `sealing`, one decryption: a block whose tag does not hold is found in the second pass,
    /// `.inconsistent`). `sealing` and `keyPrefix` as for ``forEachEntry(in:segmentID:segmentLength:sealing:keyPrefix:_:)``.
    package static func apply(
        _ bytes: UnsafeRawBufferPointer, segmentID: UInt64, segmentLength: Int64, sealing: Sealing?, keyPrefix: [UInt8]?,
        _ body: (HintEntry) -> Void
    ) -> Outcome {
        guard let summary = walk(bytes, segmentID: segmentID, sealing: sealing, keyPrefix: keyPrefix, checksums: true, decode: false, { _ in }),
              summary.coveredLength <= segmentLength else { return .invalid }
        guard let applied = walk(bytes, segmentID: segmentID, sealing: sealing, keyPrefix: keyPrefix, checksums: false, decode: true, body)
        else { return .inconsistent }
        return .applied(applied)
    }

    /// The header's summary, after checking the header (an encrypted one's tag, and that it names
    /// the segment's salt) and every block's framing, and (`checksums`) every block's checksum; with
    /// `decode`, also opens (encrypted) and decodes every entry (calling `body`) and checks the entry
    /// count and offsets.
    private static func walk(
        _ bytes: UnsafeRawBufferPointer, segmentID: UInt64, sealing: Sealing?, keyPrefix: [UInt8]?, checksums: Bool, decode: Bool,
        _ body: (HintEntry) -> Void
    ) -> Summary? {
        guard let summary = declaredSummary(bytes, sealing: sealing), summary.segmentID == segmentID,
              summary.keyPrefix == keyPrefix ?? summary.keyPrefix
        else { return nil }
        let keyPrefixLength = summary.keyPrefix.count
        let version = bytes.readLittleEndian(at: 8, as: UInt16.self)
        // An encrypted store's hints are sealed, and a store that is not encrypted has no sealed ones.
        guard isEncrypted(version: version) == (sealing != nil) else { return nil }
        let deltaCoded = isDeltaCoded(version: version)
        // A delta-coded entry's key is rebuilt here from the entry before's (allocated on the first).
        var keyBuffer: [UInt8] = []
        let cipher = sealing.map { $0.encryption.cipher(salt: UnsafeRawBufferPointer(rebasing: bytes[56..<72])) }
        let tagLength = sealing == nil ? 0 : FileCipher.tagLength
        let blockCount = Int(bytes.readLittleEndian(at: 12, as: UInt32.self))
        var position = summary.headerLength
        var offset = Int64(SegmentHeader.byteCount(encrypted: sealing != nil, keyPrefixLength: keyPrefixLength))
        var entries: UInt64 = 0
        var raw = ByteBuffer(capacity: 0)
        var opened = ByteBuffer(capacity: 0)
        for index in 0..<blockCount {
            guard bytes.count - position >= blockHeaderLength else { return nil }
            let blockStart = position
            let rawLength = Int(bytes.readLittleEndian(at: position, as: UInt32.self))
            let storedLength = Int(bytes.readLittleEndian(at: position + 4, as: UInt32.self))
            let codec = bytes.readLittleEndian(at: position + 8, as: UInt32.self)
            let crc = bytes.readLittleEndian(at: position + 12, as: UInt32.self)
            position += blockHeaderLength
            guard rawLength > 0, rawLength <= maxBlockLength, storedLength > tagLength, storedLength <= bytes.count - position,
                  let bound = storedBound(codec: codec, rawLength: rawLength),
                  codec == 0 ? storedLength == rawLength + tagLength : storedLength <= bound + tagLength
            else { return nil }
            var stored = UnsafeRawBufferPointer(rebasing: bytes[position..<(position + storedLength)])
            position += storedLength
            if checksums {
                guard CRC32C.checksum(of: stored) == crc else { return nil }
            }
            if !decode { continue }
            if let cipher {
                let sealed = storedLength - tagLength
                opened.count = 0
                var authentic = false
                opened.appendWithUnsafeSpace(sealed) { space in
                    authentic = cipher.open(
                        UnsafeRawBufferPointer(rebasing: stored[..<(stored.startIndex + sealed)]), tag: stored.baseAddress! + sealed,
                        associatedData: UnsafeRawBufferPointer(rebasing: bytes[blockStart..<(blockStart + 12)]), number: UInt64(index) + 1,
                        into: space.baseAddress!)
                    return sealed
                }
                guard authentic else { return nil }
                stored = opened.withUnsafeBytes { $0 }
            }
            let ok: Bool
            if codec != 0 {
                raw.count = 0
                var decoded = false
                raw.appendWithUnsafeSpace(rawLength) { space in
                    decoded = codec == 1 ? LZ4Decompressor.decompress(stored, into: space) : ZstdDecompressor.decompress(stored, into: space)
                    return decoded ? rawLength : 0
                }
                guard decoded else { return nil }
                ok = raw.withUnsafeBytes { block in
                    parseEntries(block, sealed: sealing != nil, keyPrefixLength: keyPrefixLength, deltaCoded: deltaCoded, keyBuffer: &keyBuffer, offset: &offset, count: &entries, body)
                }
            } else {
                ok = parseEntries(stored, sealed: sealing != nil, keyPrefixLength: keyPrefixLength, deltaCoded: deltaCoded, keyBuffer: &keyBuffer, offset: &offset, count: &entries, body)
            }
            guard ok else { return nil }
        }
        guard position == bytes.count else { return nil }
        guard !decode || (entries == summary.entryCount && offset == summary.coveredLength) else { return nil }
        return summary
    }

    /// The most bytes a block of `rawLength` bytes may be stored in with `codec` (before a sealed
    /// block's tag); nil for an unknown codec.
    private static func storedBound(codec: UInt32, rawLength: Int) -> Int? {
        switch codec {
        case 0: rawLength
        case 1: LZ4Compressor.bound(rawLength)
        case 2: ZstdCompressor.bound(rawLength)
        default: nil
        }
    }

    /// Whether a record with these fields, in a segment whose key prefix is `keyPrefixLength` bytes,
    /// could have exactly `recordLength` bytes (FORMAT.md, "Hint files"): a hint must not point the
    /// index at offsets no such record could occupy.
    private static func isPlausible(
        type: RecordType, flags: UInt8, seq: UInt64, recordLength: Int, valueLength: Int, keyLength: Int, keyPrefixLength: Int
    ) -> Bool {
        if RecordHeader.shapeProblem(type: type, flags: flags, keyLength: keyLength, valueLength: valueLength) != nil { return false }
        let fixed = 6 + Varint.size(of: seq) + Varint.size(of: UInt64(keyLength)) + Varint.size(of: UInt64(valueLength))
            + (flags & RecordFlags.expires != 0 ? 8 : 0) + (flags & RecordFlags.encrypted != 0 ? FileCipher.tagLength : 0)
        // The key's part: the whole key, or with the prefix flag an `elided` varint and the rest,
        // for some `elided` in 1 ... m: from m's size + keyLength - m (the most elided) to keyLength.
        var keyPart = keyLength...keyLength
        if flags & RecordFlags.keyPrefix != 0 {
            let most = min(keyLength, keyPrefixLength)
            guard most >= 1 else { return false }
            keyPart = (Varint.size(of: UInt64(most)) + keyLength - most)...keyLength
        }
        // The payload: valueLength bytes raw; compressed, a stored-length varint, then
        // 1 ... compressBound(valueLength) bytes.
        let rest = recordLength - fixed
        guard flags & RecordFlags.lz4 != 0 else { return keyPart.contains(rest - valueLength) }
        let bound = LZ4Compressor.bound(valueLength)
        let payload = (rest - keyPart.upperBound)...(rest - keyPart.lowerBound)
        return payload.overlaps(2...(Varint.size(of: UInt64(bound)) + bound))
    }

    /// The entries of one block, in record order. Those of a version 3 or 4 hint (`deltaCoded`) code
    /// their seq and key against the block's entry before, the key rebuilt in `keyBuffer`; those of
    /// a version 1 or 2 hint hold them whole. `body` sees an entry's key only during its call.
    /// `sealed`: entries of an encrypted segment, every one of which has the encrypted flag (and
    /// otherwise none has). `keyPrefixLength`: the segment's key prefix's (0: none, and no entry
    /// may have the key prefix flag).
    private static func parseEntries(
        _ block: UnsafeRawBufferPointer, sealed: Bool, keyPrefixLength: Int, deltaCoded: Bool, keyBuffer: inout [UInt8], offset: inout Int64,
        count: inout UInt64,
        _ body: (HintEntry) -> Void
    ) -> Bool {
        if deltaCoded && keyBuffer.isEmpty { keyBuffer = [UInt8](repeating: 0, count: Limits.maxKeyLength) }
        return keyBuffer.withUnsafeMutableBytes { keyBytes in
            var position = 0
            var previousSeq: UInt64 = 0
            var previousKeyLength = 0
            while position < block.count {
                guard block.count - position >= 2, let type = RecordType(rawValue: block[position]) else { return false }
                let flags = block[position + 1]
                guard flags & ~RecordFlags.known == 0, flags & RecordFlags.dictionary == 0 || flags & RecordFlags.lz4 != 0,
                      (flags & RecordFlags.encrypted != 0) == sealed
                else { return false }
                position += 2
                // Whole: seq, record length, value length, key length. Delta-coded: seq delta,
                // record length, value length, shared, suffix length.
                guard let seqField = Varint.read(block, at: &position),
                      let recordLength = Varint.read(block, at: &position), recordLength <= UInt64(Limits.maxRecordLength),
                      let valueLength = Varint.read(block, at: &position), valueLength <= UInt64(Limits.maxValueLength),
                      let shared = deltaCoded ? Varint.read(block, at: &position) : UInt64(0), shared <= UInt64(previousKeyLength),
                      let stored = Varint.read(block, at: &position), stored <= UInt64(Limits.maxKeyLength)
                else { return false }
                var seq = seqField
                if deltaCoded {
                    // A negative sum reads as a seq above the limit: refused below, with 0.
                    let (sum, overflow) = Int64(bitPattern: previousSeq).addingReportingOverflow(unzigzag(seqField))
                    guard !overflow else { return false }
                    seq = UInt64(bitPattern: sum)
                }
                let keyLength = Int(shared) + Int(stored)
                guard seq >= 1, seq <= Limits.maxSeq, keyLength >= 1, keyLength <= Limits.maxKeyLength,
                      isPlausible(type: type, flags: flags, seq: seq, recordLength: Int(recordLength), valueLength: Int(valueLength), keyLength: keyLength,
                                  keyPrefixLength: keyPrefixLength)
                else { return false }
                var expiresAt: UInt64?
                if flags & RecordFlags.expires != 0 {
                    guard block.count - position >= 8 else { return false }
                    expiresAt = block.readLittleEndian(at: position, as: UInt64.self)
                    position += 8
                }
                guard block.count - position >= Int(stored) else { return false }
                let storedKey = UnsafeRawBufferPointer(rebasing: block[position..<(position + Int(stored))])
                position += Int(stored)
                let key: UnsafeRawBufferPointer
                if deltaCoded {
                    UnsafeMutableRawBufferPointer(rebasing: keyBytes[Int(shared)..<keyLength]).copyMemory(from: storedKey)
                    key = UnsafeRawBufferPointer(rebasing: keyBytes[0..<keyLength])
                } else {
                    key = storedKey
                }
                body(HintEntry(
                    offset: offset, type: type, flags: flags, seq: seq, recordLength: Int(recordLength), valueLength: Int(valueLength),
                    expiresAt: expiresAt, key: key))
                offset += Int64(recordLength)
                count += 1
                previousSeq = seq
                previousKeyLength = keyLength
            }
            return true
        }
    }
}
