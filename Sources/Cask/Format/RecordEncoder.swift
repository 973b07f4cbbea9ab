/// Encodes records into a byte buffer. Owned by the store's writer (not thread-safe): the writer
/// mutex rules out overlapping access, so `scratch` opts out of dynamic exclusivity checks (they
/// were three runtime calls per record).
///
/// A value is LZ4-compressed when it is at least ``minimumCompressibleLength`` bytes and the
/// block saves at least 1/8 of them; otherwise it is stored raw. Encoding allocates nothing once
/// the buffers have grown to the working size.
package final class RecordEncoder {
    /// Values shorter than this are never compressed: LZ4 cannot save 1/8 of them reliably.
    package static let minimumCompressibleLength = 32

    private let compressor = LZ4Compressor()
    /// The payload length of the last record ``append(type:seq:key:value:expiresAt:batchMember:dictionary:to:)`` wrote.
    package private(set) var lastStoredLength = 0
    @exclusivity(unchecked) private var scratch = ByteBuffer(capacity: 4096)

    package init() {}

    /// Appends one complete record (checksum included) to `buffer`; returns its length in bytes.
    /// The caller has checked the key and value lengths against ``Limits``. With a `dictionary` (the
    /// one the record's segment names), a compressed value is compressed against it and flagged
    /// ``RecordFlags/dictionary``. With a `cipher` (the segment's, in an encrypted store) the key and
    /// payload are sealed as message `offset`, the record's place in its segment, and flagged
    /// ``RecordFlags/encrypted``: the record must be written there, and nothing else ever sealed
    /// there with that cipher (FORMAT.md, "Encryption"). With a `keyPrefix` (the segment's; never
    /// with a cipher), a key that shares at least 2 bytes with it stores only the rest
    /// (``RecordFlags/keyPrefix``).
    package func append(
        type: RecordType, seq: UInt64, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
        expiresAt: UInt64?, batchMember: Bool = false, dictionary: LZ4Dictionary? = nil, cipher: FileCipher? = nil, offset: Int64 = 0,
        keyPrefix: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0), to buffer: inout ByteBuffer
    ) -> Int {
        var flags: UInt8 = (expiresAt == nil ? 0 : RecordFlags.expires) | (batchMember ? RecordFlags.batchMember : 0)
            | (cipher == nil ? 0 : RecordFlags.encrypted)
        precondition(cipher == nil || keyPrefix.isEmpty, "an encrypted segment names no key prefix")
        let elided = type == .batch ? 0 : Self.elidedLength(of: key, prefix: keyPrefix)
        if elided > 0 { flags |= RecordFlags.keyPrefix }
        var storedLength = value.count
        if value.count >= Self.minimumCompressibleLength && type == .put {
            let allowed = value.count - value.count / 8  // must save at least 1/8
            scratch.count = 0
            var compressedLength = 0
            scratch.appendWithUnsafeSpace(allowed) { space in
                compressedLength = compressor.compress(value, into: space, dictionary: dictionary) ?? 0
                return compressedLength
            }
            if compressedLength > 0 {
                flags |= RecordFlags.lz4 | (dictionary == nil ? 0 : RecordFlags.dictionary)
                storedLength = compressedLength
            }
        }
        let compressed = flags & RecordFlags.lz4 != 0
        lastStoredLength = storedLength
        let limit = Limits.maxRecordOverhead + key.count + storedLength
        var length = 0
        // One reservation, then the header is written field by field through a pointer: this is the
        // put hot path, and per-field appends each re-check the capacity.
        scratch.withUnsafeBytes { compressedValue in
            buffer.appendWithUnsafeSpace(limit) { space in
                let base = space.baseAddress!
                base.storeBytes(of: type.rawValue, toByteOffset: 4, as: UInt8.self)
                base.storeBytes(of: flags, toByteOffset: 5, as: UInt8.self)
                var position = Self.writeFields(
                    to: base, seq: seq, keyLength: key.count, elided: elided, valueLength: value.count,
                    storedLength: compressed ? storedLength : nil, expiresAt: expiresAt)
                let headerLength = position
                if let keyBase = key.baseAddress { (base + position).copyMemory(from: keyBase + elided, byteCount: key.count - elided) }
                position += key.count - elided
                let payload = compressed ? compressedValue : value
                if let payloadBase = payload.baseAddress { (base + position).copyMemory(from: payloadBase, byteCount: storedLength) }
                position += storedLength
                if let cipher { position = Self.seal(base, headerLength: headerLength, end: position, cipher: cipher, offset: offset) }
                Self.storeChecksum(base, length: position)
                length = position
                return position
            }
        }
        if scratch.capacity > 1 << 20 { scratch.reset(shrinkingTo: 4096) }  // do not pin a huge value's buffer
        return length
    }

    /// How many leading bytes of `key` a record in a segment whose key prefix is `prefix` elides:
    /// the bytes they share, when at least 2 (1 would save nothing: its count takes a byte); else 0.
    @inline(__always)
    package static func elidedLength(of key: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer) -> Int {
        let limit = min(key.count, prefix.count)
        guard limit >= 2, key[0] == prefix[0], key[1] == prefix[1] else { return 0 }
        var shared = 2
        while shared < limit && key[shared] == prefix[shared] { shared += 1 }
        return shared
    }

    /// Writes a record header's fields after the checksum at `base` (type and flags are the
    /// caller's); returns the header's length.
    @inline(__always)
    private static func writeFields(
        to base: UnsafeMutableRawPointer, seq: UInt64, keyLength: Int, elided: Int, valueLength: Int, storedLength: Int?, expiresAt: UInt64?
    ) -> Int {
        var position = 6
        position += Varint.write(seq, to: base + position)
        position += Varint.write(UInt64(keyLength), to: base + position)
        if elided > 0 { position += Varint.write(UInt64(elided), to: base + position) }
        position += Varint.write(UInt64(valueLength), to: base + position)
        if let storedLength { position += Varint.write(UInt64(storedLength), to: base + position) }
        if let expiresAt {
            base.storeBytes(of: expiresAt.littleEndian, toByteOffset: position, as: UInt64.self)
            position += 8
        }
        return position
    }

    /// Stores, in the first 4 bytes of the `length`-byte record at `base`, the crc32c of the rest.
    @inline(__always)
    private static func storeChecksum(_ base: UnsafeMutableRawPointer, length: Int) {
        let crc = CRC32C.checksum(of: UnsafeRawBufferPointer(start: base + 4, count: length - 4))
        base.storeBytes(of: crc.littleEndian, toByteOffset: 0, as: UInt32.self)
    }

    /// Seals bytes `headerLength ..< end` at `base` (a record's key and payload) in place as message
    /// `offset` of `cipher`, the header's bytes after its checksum as associated data, and stores
    /// the tag after them; returns where the record ends.
    @inline(__always)
    private static func seal(_ base: UnsafeMutableRawPointer, headerLength: Int, end: Int, cipher: FileCipher, offset: Int64) -> Int {
        cipher.seal(
            UnsafeMutableRawBufferPointer(start: base + headerLength, count: end - headerLength),
            associatedData: UnsafeRawBufferPointer(start: base + 4, count: headerLength - 4), number: UInt64(offset), tag: base + end)
        return end + FileCipher.tagLength
    }

    /// Appends the record whose plain form is `plain` — a valid record's header, key and payload
    /// as a reader hands them on (``SegmentReader``: decrypted, without a tag) — as it is to be
    /// written at `offset` of a segment: sealed with `cipher` (the segment's; nil for a store that
    /// is not encrypted), and with `clearingBatchMember`, as an ordinary record (a committed batch
    /// member that compaction copies). Its checksum is computed again. Returns its length. (A
    /// record moving between segments whose key prefixes differ in what it elides goes through
    /// ``appendRekeyed(plain:header:clearingBatchMember:keyPrefix:to:)`` instead.)
    package static func appendRecord(
        plain: UnsafeRawBufferPointer, header: RecordHeader, clearingBatchMember: Bool, cipher: FileCipher?, offset: Int64,
        to buffer: inout ByteBuffer
    ) -> Int {
        let plainLength = header.payloadEnd
        precondition(plain.count >= plainLength)
        var length = 0
        buffer.appendWithUnsafeSpace(plainLength + FileCipher.tagLength) { space in
            let base = space.baseAddress!
            base.copyMemory(from: plain.baseAddress!, byteCount: plainLength)
            var flags = header.flags & ~RecordFlags.encrypted | (cipher == nil ? 0 : RecordFlags.encrypted)
            if clearingBatchMember { flags &= ~RecordFlags.batchMember }
            base.storeBytes(of: flags, toByteOffset: 5, as: UInt8.self)
            length = plainLength
            if let cipher { length = seal(base, headerLength: header.headerLength, end: plainLength, cipher: cipher, offset: offset) }
            storeChecksum(base, length: length)
            return length
        }
        return length
    }

    /// Whether a record moving from a segment whose key prefix is `keyPrefix.from` to one whose
    /// prefix is `keyPrefix.to` must elide another number of key bytes, or other bytes, than it does.
    package static func needsNewHeader(
        _ header: RecordHeader, plain: UnsafeRawBufferPointer, keyPrefix: (from: UnsafeRawBufferPointer, to: UnsafeRawBufferPointer)
    ) -> Bool {
        if header.type == .batch { return false }
        if header.elidedLength == 0 && keyPrefix.to.count < 2 { return false }
        return header.withKey(in: plain, prefix: keyPrefix.from) { key in
            let elided = elidedLength(of: key, prefix: keyPrefix.to)
            return elided != header.elidedLength
                || !UnsafeRawBufferPointer(rebasing: keyPrefix.to[0..<elided]).hasSameBytes(as: UnsafeRawBufferPointer(rebasing: keyPrefix.from[0..<elided]))
        }
    }

    /// Appends the record whose plain form is `plain`, read from a segment whose key prefix is
    /// `keyPrefix.from`, as it is to be written in a segment whose prefix is `keyPrefix.to` (of a
    /// store that is not encrypted: neither names one otherwise), with its key's elided bytes chosen
    /// for the new prefix (``needsNewHeader(_:plain:keyPrefix:)``) and, with `clearingBatchMember`,
    /// as an ordinary record: its header written again, seq, lengths, expiry and payload unchanged,
    /// and checksummed. Returns its length.
    package static func appendRekeyed(
        plain: UnsafeRawBufferPointer, header: RecordHeader, clearingBatchMember: Bool,
        keyPrefix: (from: UnsafeRawBufferPointer, to: UnsafeRawBufferPointer), to buffer: inout ByteBuffer
    ) -> Int {
        precondition(plain.count >= header.payloadEnd && !header.isEncrypted)
        let payload = UnsafeRawBufferPointer(rebasing: plain[header.payloadRange])
        return header.withKey(in: plain, prefix: keyPrefix.from) { key in
            let elided = elidedLength(of: key, prefix: keyPrefix.to)
            var flags = header.flags & ~RecordFlags.keyPrefix | (elided > 0 ? RecordFlags.keyPrefix : 0)
            if clearingBatchMember { flags &= ~RecordFlags.batchMember }
            var length = 0
            buffer.appendWithUnsafeSpace(Limits.maxRecordOverhead + key.count + payload.count) { space in
                let base = space.baseAddress!
                base.storeBytes(of: header.type.rawValue, toByteOffset: 4, as: UInt8.self)
                base.storeBytes(of: flags, toByteOffset: 5, as: UInt8.self)
                var position = writeFields(
                    to: base, seq: header.seq, keyLength: key.count, elided: elided, valueLength: header.valueLength,
                    storedLength: header.isCompressed ? header.storedLength : nil, expiresAt: header.expiresAt)
                (base + position).copyMemory(from: key.baseAddress! + elided, byteCount: key.count - elided)
                position += key.count - elided
                if let payloadBase = payload.baseAddress { (base + position).copyMemory(from: payloadBase, byteCount: payload.count) }
                position += payload.count
                storeChecksum(base, length: position)
                length = position
                return position
            }
            return length
        }
    }
}
