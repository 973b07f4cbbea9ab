/// The decoded fixed part of a record. See FORMAT.md, "Records".
///
/// ```
/// u32  crc32c     over every byte after this field, up to the end of the payload
/// u8   type       1 put, 2 delete, 3 batch commit
/// u8   flags      bit 0 lz4, bit 1 expires, bit 2 batch member, bit 3 dictionary (only with lz4),
///                 bit 4 encrypted, bit 5 key prefix (never with encrypted); other bits zero
/// var  seq        sequence number (LEB128)
/// var  keyLength  1 ... 65,535 (the whole key's)
/// var  elided     only when flags.keyPrefix: 1 ... min(keyLength, 255) leading key bytes that are the
///                 segment's key prefix's, not stored
/// var  valueLength  uncompressed value length, 0 ... 256 MiB (0 for delete)
/// var  storedLength only when flags.lz4: payload bytes on disk, 1 ... bound(valueLength)
/// u64  expiresAt  only when flags.expires: milliseconds since 1970-01-01 UTC
/// key bytes (keyLength - elided), then payload bytes (storedLength, or valueLength when not compressed)
/// encrypted: key and payload are ciphertext, followed by a 16-byte tag
/// ```
package struct RecordHeader: Equatable, Sendable {
    package var type: RecordType
    package var flags: UInt8
    package var seq: UInt64
    /// The whole key's length, its elided prefix included.
    package var keyLength: Int
    /// How many of the key's first bytes are the segment's key prefix's, not stored (0 without
    /// ``RecordFlags/keyPrefix``).
    package var elidedLength: Int
    package var valueLength: Int
    package var storedLength: Int
    package var expiresAt: UInt64?
    /// Bytes from the start of the record to the first key byte.
    package var headerLength: Int

    package var isCompressed: Bool { flags & RecordFlags.lz4 != 0 }
    /// Whether the LZ4 payload needs the segment's dictionary to expand.
    package var usesDictionary: Bool { flags & RecordFlags.dictionary != 0 }
    /// Whether the key and payload are sealed, and a tag follows them.
    package var isEncrypted: Bool { flags & RecordFlags.encrypted != 0 }
    /// The key bytes the record stores: all but the elided prefix.
    package var storedKeyLength: Int { keyLength - elidedLength }
    /// Where the payload ends: the end of the record, or of its ciphertext.
    package var payloadEnd: Int { headerLength + storedKeyLength + storedLength }
    /// Where the stored key bytes are in the record's bytes (an encrypted record's once opened).
    /// The whole key is the segment's prefix's first ``elidedLength`` bytes and these: readers take
    /// it from ``withKey(in:prefix:_:)``.
    package var storedKeyRange: Range<Int> { headerLength..<(headerLength + storedKeyLength) }
    /// Where the stored payload is: right after the stored key, ``storedLength`` bytes.
    package var payloadRange: Range<Int> { (headerLength + storedKeyLength)..<payloadEnd }

    /// Calls `body` with the key of the record whose bytes (its plain form) start at `record`, in
    /// a segment whose key prefix is `prefix` (empty for none): the stored bytes themselves, or the
    /// prefix's first ``elidedLength`` bytes and them, put together on the stack. The header was
    /// parsed with that prefix's length, so the prefix holds the bytes elided.
    @inline(__always)
    package func withKey<R>(in record: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard elidedLength > 0 else { return try body(UnsafeRawBufferPointer(rebasing: record[storedKeyRange])) }
        return try withUnsafeTemporaryAllocation(byteCount: keyLength, alignment: 1) { scratch in
            try body(key(in: record, prefix: prefix, scratch: scratch))
        }
    }

    /// The key of the record whose bytes start at `record`, as ``withKey(in:prefix:_:)`` gives it,
    /// put together in `scratch` (at least ``keyLength`` bytes) when it elides a prefix: for a loop
    /// over many records, with one scratch buffer. Valid while `record` and `scratch` are.
    @inline(__always)
    package func key(in record: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer, scratch: UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer {
        let stored = UnsafeRawBufferPointer(rebasing: record[storedKeyRange])
        guard elidedLength > 0 else { return stored }
        precondition(elidedLength <= prefix.count && keyLength <= scratch.count, "a record's elided key bytes are its segment's prefix's")
        scratch.baseAddress!.copyMemory(from: prefix.baseAddress!, byteCount: elidedLength)
        if let storedBase = stored.baseAddress { (scratch.baseAddress! + elidedLength).copyMemory(from: storedBase, byteCount: stored.count) }
        return UnsafeRawBufferPointer(start: scratch.baseAddress, count: keyLength)
    }

    /// Whether the key of a record of this header whose stored key bytes are `stored`, in a segment
    /// whose key prefix is `prefix`, is `key`, compared in place.
    @inline(__always)
    package func isKey(_ key: UnsafeRawBufferPointer, stored: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer) -> Bool {
        guard key.count == keyLength else { return false }
        guard elidedLength > 0 else { return stored.hasSameBytes(as: key) }
        return UnsafeRawBufferPointer(rebasing: key[0..<elidedLength]).hasSameBytes(as: UnsafeRawBufferPointer(rebasing: prefix[0..<elidedLength]))
            && UnsafeRawBufferPointer(rebasing: key[elidedLength...]).hasSameBytes(as: stored)
    }

    /// The key of the record at `record` (in a segment whose key prefix is `prefix`), appended to `bytes`.
    package func appendKey(in record: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: prefix[0..<elidedLength]))
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: record[storedKeyRange]))
    }

    /// The key of the record at `record` (in a segment whose key prefix is `prefix`).
    package func key(in record: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(keyLength)
        appendKey(in: record, prefix: prefix, to: &bytes)
        return bytes
    }
    /// The whole record: header, key and payload, and an encrypted record's tag.
    package var recordLength: Int { payloadEnd + (isEncrypted ? FileCipher.tagLength : 0) }

    /// Why bytes are not a valid record.
    package enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// The record would run past the bytes available (a torn write, or a corrupt length).
        case truncated(needed: Int)
        case malformed(String)
        case checksumMismatch(stored: UInt32, computed: UInt32)
        /// An encrypted record whose tag does not hold: altered (its checksum computed again), moved
        /// from another place or segment, or sealed under another key.
        case notAuthentic

        package var description: String {
            switch self {
            case .truncated(let needed): "record is cut short (needs \(needed) bytes)"
            case .malformed(let reason): reason
            case .checksumMismatch(let stored, let computed):
                "checksum mismatch (stored 0x\(String(stored, radix: 16)), computed 0x\(String(computed, radix: 16)))"
            case .notAuthentic:
                "authentication failed (the record was altered or moved, or sealed under another key)"
            }
        }
    }

    /// Parses and validates the header at the start of `bytes` without checking the checksum.
    /// `bytes` may hold less than the whole record; lengths are checked against ``Limits`` first.
    /// `keyPrefixLength`: the length of the key prefix the record's segment names (0 for none), the
    /// most key bytes the record may elide.
    package static func parse(_ bytes: UnsafeRawBufferPointer, keyPrefixLength: Int) -> Result<RecordHeader, Problem> {
        var problem: Problem?
        guard let header = parse(bytes, keyPrefixLength: keyPrefixLength, explaining: true, problem: &problem) else { return .failure(problem!) }
        return .success(header)
    }

    /// The one set of rules behind ``parse(_:keyPrefixLength:)``. Sets `problem` only when `explaining`, so that a
    /// caller inlining it with `false` builds no message: it rejects exactly the same bytes.
    @inline(__always)
    package static func parse(_ bytes: UnsafeRawBufferPointer, keyPrefixLength: Int, explaining: Bool, problem: inout Problem?) -> RecordHeader? {
        func fail(_ reason: @autoclosure () -> Problem) -> RecordHeader? {
            if explaining { problem = reason() }
            return nil
        }
        guard bytes.count >= 6 else { return fail(.truncated(needed: 6)) }
        guard let type = RecordType(rawValue: bytes[4]) else {
            return fail(.malformed("unknown record type \(bytes[4])"))
        }
        let flags = bytes[5]
        guard flags & ~RecordFlags.known == 0 else { return fail(.malformed("unknown flags 0x\(String(flags, radix: 16))")) }
        guard flags & RecordFlags.dictionary == 0 || flags & RecordFlags.lz4 != 0 else {
            return fail(.malformed("dictionary flag without the lz4 flag"))
        }
        guard flags & RecordFlags.keyPrefix == 0 || flags & RecordFlags.encrypted == 0 else {
            return fail(.malformed("key prefix flag on an encrypted record"))
        }
        var offset = 6
        guard let seq = Varint.read(bytes, at: &offset) else { return fail(shortOrBad(bytes, offset, "sequence number")) }
        guard seq >= 1, seq <= Limits.maxSeq else { return fail(.malformed("sequence number \(seq) outside 1...\(Limits.maxSeq)")) }
        guard let keyLength = Varint.read(bytes, at: &offset) else { return fail(shortOrBad(bytes, offset, "key length")) }
        guard keyLength >= 1, keyLength <= UInt64(Limits.maxKeyLength) else {
            return fail(.malformed("key length \(keyLength) outside 1...\(Limits.maxKeyLength)"))
        }
        var elided: UInt64 = 0
        if flags & RecordFlags.keyPrefix != 0 {
            guard let count = Varint.read(bytes, at: &offset) else { return fail(shortOrBad(bytes, offset, "elided key length")) }
            guard count >= 1, count <= keyLength, count <= UInt64(keyPrefixLength) else {
                return fail(.malformed(
                    keyPrefixLength == 0
                        ? "key prefix flag in a segment that names no key prefix"
                        : "elided key length \(count) outside 1...\(min(keyLength, UInt64(keyPrefixLength))) (the key's length and the segment's prefix's)"))
            }
            elided = count
        }
        guard let valueLength = Varint.read(bytes, at: &offset) else { return fail(shortOrBad(bytes, offset, "value length")) }
        guard valueLength <= UInt64(Limits.maxValueLength) else {
            return fail(.malformed("value length \(valueLength) over the limit \(Limits.maxValueLength)"))
        }
        var storedLength = valueLength
        if flags & RecordFlags.lz4 != 0 {
            guard let stored = Varint.read(bytes, at: &offset) else { return fail(shortOrBad(bytes, offset, "stored length")) }
            guard stored >= 1, stored <= UInt64(LZ4Compressor.bound(Int(valueLength))) else {
                return fail(.malformed("compressed length \(stored) impossible for value length \(valueLength)"))
            }
            storedLength = stored
        }
        if let problem = shapeProblem(type: type, flags: flags, keyLength: Int(keyLength), valueLength: Int(valueLength)) {
            return fail(.malformed(problem))
        }
        var expiresAt: UInt64?
        if flags & RecordFlags.expires != 0 {
            guard bytes.count >= offset + 8 else { return fail(.truncated(needed: offset + 8)) }
            expiresAt = bytes.readLittleEndian(at: offset, as: UInt64.self)
            offset += 8
        }
        return RecordHeader(
            type: type, flags: flags, seq: seq, keyLength: Int(keyLength), elidedLength: Int(elided), valueLength: Int(valueLength),
            storedLength: Int(storedLength), expiresAt: expiresAt, headerLength: offset)
    }

    /// What is wrong with a delete or batch commit record of these fields (FORMAT.md, "Records"), if
    /// anything. Hint entries are held to the same shapes.
    package static func shapeProblem(type: RecordType, flags: UInt8, keyLength: Int, valueLength: Int) -> String? {
        switch type {
        case .delete where valueLength != 0 || flags & ~(RecordFlags.batchMember | RecordFlags.encrypted | RecordFlags.keyPrefix) != 0:
            "delete record carries a value, compression or an expiry"
        case .batch where keyLength != 8 || !(1...5).contains(valueLength) || flags & ~RecordFlags.encrypted != 0:
            "batch commit record must have an 8-byte key, a 1...5-byte raw value and no flags but the encrypted flag"
        default:
            nil
        }
    }

    private static func shortOrBad(_ bytes: UnsafeRawBufferPointer, _ offset: Int, _ field: String) -> Problem {
        // A varint that ran off the end may just be cut short; one that ran 10 bytes is malformed.
        bytes.count - offset < 10 ? .truncated(needed: offset + 10) : .malformed("\(field) is not a valid varint")
    }

    /// Validates a whole record held in `bytes` (which starts at the record): header, length, checksum.
    /// `keyPrefixLength` as for ``parse(_:keyPrefixLength:)``.
    package static func validate(_ bytes: UnsafeRawBufferPointer, keyPrefixLength: Int) -> Result<RecordHeader, Problem> {
        var problem: Problem?
        guard let header = validate(bytes, keyPrefixLength: keyPrefixLength, explaining: true, problem: &problem) else { return .failure(problem!) }
        return .success(header)
    }

    /// The one set of checks behind ``validate(_:keyPrefixLength:)``, as ``parse(_:keyPrefixLength:explaining:problem:)`` is for the
    /// header. For a caller that chooses at run time whether it needs the reason (the read path,
    /// `CaskStore.checkRecord`); `problem` is set only when `explaining`, and the same bytes are
    /// rejected either way.
    @inline(__always)
    package static func validate(_ bytes: UnsafeRawBufferPointer, keyPrefixLength: Int, explaining: Bool, problem: inout Problem?) -> RecordHeader? {
        guard let header = parse(bytes, keyPrefixLength: keyPrefixLength, explaining: explaining, problem: &problem) else { return nil }
        guard bytes.count >= header.recordLength else {
            if explaining { problem = .truncated(needed: header.recordLength) }
            return nil
        }
        let stored = bytes.readLittleEndian(at: 0, as: UInt32.self)
        let computed = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: bytes[4..<header.recordLength]))
        guard stored == computed else {
            if explaining { problem = .checksumMismatch(stored: stored, computed: computed) }
            return nil
        }
        return header
    }
}
