/// Writing hint files (FORMAT.md, "Hint files"); ``HintFile`` reads them.
extension HintFile {
    /// Builds a hint file incrementally as a segment is scanned.
    package struct Encoder: ~Copyable {
        private let segmentID: UInt64
        private var raw = ByteBuffer(capacity: 64 << 10)
        private var output = ByteBuffer(capacity: 64 << 10)
        private var blocks: UInt32 = 0
        private var entries: UInt64 = 0
        private var coveredLength: Int64
        /// The key and seq of the block's last entry, which the next one is coded against.
        private var previousKey: [UInt8] = []
        private var previousSeq: UInt64 = 0
        private let compressor = ZstdCompressor()
        private let keyPrefix: [UInt8]
        /// An encrypted store's: the segment's salt, the hint's salt and its cipher.
        private let sealing: (segmentSalt: [UInt8], salt: [UInt8], cipher: FileCipher)?

        /// An encoder of segment `segmentID`'s hint, whose header names `keyPrefix` (empty: none),
        /// which the hint holds too; `sealing` for a segment of an encrypted store.
        package init(segmentID: UInt64, keyPrefix: [UInt8] = [], sealing: Sealing? = nil) {
            precondition(sealing == nil || keyPrefix.isEmpty, "an encrypted segment names no key prefix")
            self.segmentID = segmentID
            self.keyPrefix = keyPrefix
            if let sealing {
                let (salt, cipher) = sealing.encryption.newCipher()
                self.sealing = (sealing.segmentSalt, salt, cipher)
            } else {
                self.sealing = nil
            }
            coveredLength = Int64(SegmentHeader.byteCount(encrypted: sealing != nil, keyPrefixLength: keyPrefix.count))
            output.count = sealing == nil ? HintFile.headerLength + keyPrefix.count : HintFile.encryptedHeaderLength  // header written by `finish`
        }

        /// Adds the record that starts at the current covered length.
        package mutating func add(_ header: RecordHeader, key: UnsafeRawBufferPointer) {
            if raw.count + HintFile.maxEntryLength > HintFile.maxBlockLength { flushBlock() }
            let shared = zip(previousKey, key).prefix { $0 == $1 }.count
            raw.append(byte: header.type.rawValue)
            raw.append(byte: header.flags)
            raw.append(varint: HintFile.zigzag(header.seq &- previousSeq))
            raw.append(varint: UInt64(header.recordLength))
            raw.append(varint: UInt64(header.valueLength))
            raw.append(varint: UInt64(shared))
            raw.append(varint: UInt64(key.count - shared))
            if let expiresAt = header.expiresAt { raw.append(littleEndian: expiresAt) }
            raw.append(UnsafeRawBufferPointer(rebasing: key[shared...]))
            previousKey.replaceSubrange(shared..., with: key[shared...])
            previousSeq = header.seq
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
            let codec: UInt32 = stored > 0 ? 2 : 0
            if stored == 0 {
                raw.withUnsafeBytes { output.append($0) }
                stored = raw.count
            }
            if let sealing {
                // Sealed as message `index + 1`, the block's lengths and codec as associated data.
                output.set(littleEndian: UInt32(stored + FileCipher.tagLength), at: start + 4)
                output.set(littleEndian: codec, at: start + 8)
                output.reserve(FileCipher.tagLength)
                output.withUnsafeMutableCapacity { space in
                    let base = space.baseAddress!
                    sealing.cipher.seal(
                        UnsafeMutableRawBufferPointer(start: base + start + HintFile.blockHeaderLength, count: stored),
                        associatedData: UnsafeRawBufferPointer(start: base + start, count: 12), number: UInt64(blocks) + 1,
                        tag: base + start + HintFile.blockHeaderLength + stored)
                }
                output.count += FileCipher.tagLength
                stored += FileCipher.tagLength
            }
            let crc = output.withUnsafeBytes {
                CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: $0[(start + HintFile.blockHeaderLength)...]))
            }
            output.set(littleEndian: UInt32(stored), at: start + 4)
            output.set(littleEndian: codec, at: start + 8)
            output.set(littleEndian: crc, at: start + 12)
            blocks += 1
            raw.count = 0
            previousKey.removeAll(keepingCapacity: true)
            previousSeq = 0
        }

        /// The complete hint file bytes.
        package consuming func finish() -> [UInt8] {
            flushBlock()
            let headerLength = sealing == nil ? HintFile.headerLength + keyPrefix.count : HintFile.encryptedHeaderLength
            var header = ByteBuffer(capacity: headerLength)
            HintFile.magic.withUnsafeBytes { header.append($0) }
            header.append(littleEndian: sealing == nil ? HintFile.writtenVersion : HintFile.writtenEncryptedVersion)
            header.append(littleEndian: UInt16(headerLength))
            header.append(littleEndian: blocks)
            header.append(littleEndian: segmentID)
            header.append(littleEndian: UInt64(coveredLength))
            header.append(littleEndian: entries)
            if let sealing {
                sealing.segmentSalt.withUnsafeBytes { header.append($0) }
                sealing.salt.withUnsafeBytes { header.append($0) }
                let tag = header.withUnsafeBytes { sealing.cipher.tag(authenticating: $0, number: 0) }
                tag.withUnsafeBytes { header.append($0) }
            }
            header.append(littleEndian: UInt32(keyPrefix.count))
            keyPrefix.withUnsafeBytes { header.append($0) }
            let crc = header.withUnsafeBytes { CRC32C.checksum(of: $0) }
            header.append(littleEndian: crc)
            var bytes = output.copyBytes()
            header.withUnsafeBytes { headerBytes in
                for index in 0..<headerLength { bytes[index] = headerBytes[index] }
            }
            return bytes
        }
    }
}
