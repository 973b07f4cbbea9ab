#if canImport(Glibc)
import Glibc
#endif

/// Checking a record read through the index, and expanding its value: what every read path (the
/// locked one, the lock-free copy, listings) does to the bytes it read.
extension CaskStore {
    /// A record that passed ``validateRecord(_:key:file:offset:plain:)``: its header, its key (the
    /// one it was validated for) and a view of its payload inside the bytes it was validated in (a
    /// sealed record's: in the buffer it was opened into).
    struct ValidRecord {
        var header: RecordHeader
        var key: UnsafeRawBufferPointer
        /// The value as stored: LZ4-compressed when `header.isCompressed`.
        var payload: UnsafeRawBufferPointer
    }

    /// Validates a whole record read for `key` through the index: checksum, lengths, type, key (and
    /// in an encrypted segment, its tag: it is opened into `plain`, which holds at least
    /// `record.count` bytes). Returns nil when the record has expired.
    static func validateRecord(
        _ record: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, file: SegmentFile, offset: UInt32, plain: UnsafeMutableRawBufferPointer
    ) throws(CaskError) -> ValidRecord? {
        switch checkRecord(record, key: key, explaining: true, cipher: file.sealing?.cipher, keyPrefix: file.keyPrefixBytes, offset: offset, plain: plain) {
        case .valid(let valid): return valid
        case .expired: return nil
        case .mismatch(let reason):
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: reason ?? "record does not match the index")
        case .otherKey:
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: "record holds a different key")
        }
    }

    /// What ``checkRecord(_:key:explaining:)`` found.
    enum RecordCheck {
        case valid(ValidRecord)
        /// A valid record of the key, past its expiry.
        case expired
        /// Damaged, or not the key's put. The reason is given only when explaining.
        case mismatch(reason: String?)
        /// An intact put of another key.
        case otherKey
    }

    /// No buffer: what a record of a segment that is not encrypted is checked with.
    static var noPlain: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: nil, count: 0) }

    /// The checks of ``validateRecord(_:key:file:offset:plain:)``: the record's header, length and
    /// checksum (``RecordHeader/validate(_:)``), its type, in an encrypted segment (`cipher`) its tag
    /// as message `offset` (its key and payload are then opened into `plain`, at least `record.count`
    /// bytes), its key (whose first bytes may be the segment's `keyPrefix`), and its expiry. Not
    /// explaining, it rejects the same bytes and builds no message.
    @inline(__always)
    static func checkRecord(
        _ record: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, explaining: Bool, cipher: FileCipher?, keyPrefix: UnsafeRawBufferPointer,
        offset: UInt32, plain: UnsafeMutableRawBufferPointer
    ) -> RecordCheck {
        var problem: RecordHeader.Problem?
        guard let header = RecordHeader.validate(record, keyPrefixLength: keyPrefix.count, explaining: explaining, problem: &problem) else {
            return .mismatch(reason: problem?.description)
        }
        guard header.recordLength == record.count, header.type == .put else {
            return .mismatch(reason: explaining ? "record does not match the index" : nil)
        }
        guard header.isEncrypted == (cipher != nil) else {
            return .mismatch(reason: explaining ? (cipher != nil ? "record is not encrypted, in an encrypted segment" : "encrypted record in a segment that is not encrypted") : nil)
        }
        // The key and payload: as they are, or opened (never compared before their tag holds).
        let body: UnsafeRawBufferPointer
        if let cipher {
            let sealed = header.storedKeyLength + header.storedLength
            guard plain.count >= sealed, cipher.open(
                UnsafeRawBufferPointer(rebasing: record[header.headerLength..<header.payloadEnd]), tag: record.baseAddress! + header.payloadEnd,
                associatedData: UnsafeRawBufferPointer(rebasing: record[4..<header.headerLength]), number: UInt64(offset),
                into: plain.baseAddress!)
            else { return .mismatch(reason: explaining ? RecordHeader.Problem.notAuthentic.description : nil) }
            body = UnsafeRawBufferPointer(rebasing: plain[0..<sealed])
        } else {
            body = UnsafeRawBufferPointer(rebasing: record[header.headerLength..<header.payloadEnd])
        }
        guard header.isKey(key, stored: UnsafeRawBufferPointer(rebasing: body[0..<header.storedKeyLength]), prefix: keyPrefix) else { return .otherKey }
        if let expiresAt = header.expiresAt, expiresAt <= Self.nowMilliseconds() { return .expired }
        let payload = UnsafeRawBufferPointer(rebasing: body[header.storedKeyLength...])
        return .valid(ValidRecord(header: header, key: key, payload: payload))
    }

    /// Decompresses the payload of a valid compressed record into `destination`, which holds
    /// exactly `header.valueLength` bytes.
    /// A record flagged ``RecordFlags/dictionary`` expands with its segment's dictionary; when that
    /// is missing or damaged, the read fails naming it.
    static func expand(_ record: ValidRecord, into destination: UnsafeMutableRawBufferPointer, file: SegmentFile, offset: UInt32) throws(CaskError) {
        if let problem = payloadProblem(record.header, payload: record.payload, dictionary: file.dictionary, into: destination) {
            throw CaskError.corruptRecord(path: file.path, offset: Int64(offset), reason: problem)
        }
    }

    /// Expands a compressed payload into `destination` (exactly `header.valueLength` bytes), and
    /// says why it cannot be, if it cannot: rule 5 of FORMAT.md's "Validation". Every reader of
    /// values goes through here: gets, iteration, `verify`, repair and compaction.
    static func payloadProblem(
        _ header: RecordHeader, payload: UnsafeRawBufferPointer, dictionary: SegmentDictionary, into destination: UnsafeMutableRawBufferPointer
    ) -> String? {
        if header.usesDictionary {
            guard case .loaded(let loaded) = dictionary else { return dictionary.problem }
            guard LZ4Decompressor.decompress(payload, into: destination, dictionary: loaded.lz4.content) else {
                return "LZ4 payload does not expand to \(header.valueLength) bytes with dictionary \(loaded.id)"
            }
            return nil
        }
        guard LZ4Decompressor.decompress(payload, into: destination) else {
            return "LZ4 payload does not expand to \(header.valueLength) bytes"
        }
        return nil
    }

    /// Calls `body` with the value of a valid record: its payload, or the payload expanded into a
    /// scratch buffer (on the stack when small). The bytes are valid only during the call.
    static func withValueBytes<R>(
        of valid: ValidRecord, file: SegmentFile, offset: UInt32, _ body: (UnsafeRawBufferPointer) -> R
    ) throws(CaskError) -> R {
        guard valid.header.isCompressed else { return body(valid.payload) }
        return try withScratchBytes(valid.header.valueLength) { (buffer) throws(CaskError) -> R in
            try expand(valid, into: buffer, file: file, offset: offset)
            return body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// The entries a get without the lock tries (``copyValueWithoutLock(key:into:)``) before it
    /// takes the lock: the key's own is nearly always the first or the second.
    static let quickCandidates = 3

    /// Values up to this size are expanded on the stack and copied into their array.
    static let smallValueLimit = 1024

    /// The value of a valid record, expanded if it is compressed.
    static func value(of valid: ValidRecord, file: SegmentFile, offset: UInt32) throws(CaskError) -> [UInt8] {
        if !valid.header.isCompressed || valid.header.valueLength <= smallValueLimit {
            // Expanding on the stack and copying out is about 50 ns faster than filling an
            // uninitialized array, whose allocation goes through an unspecialized generic path
            // of the standard library (a metadata lookup per call).
            return try withValueBytes(of: valid, file: file, offset: offset) { Array($0) }
        }
        var failure: CaskError?
        let value = [UInt8](unsafeUninitializedCapacity: valid.header.valueLength) { buffer, initialized in
            do throws(CaskError) {
                try expand(valid, into: UnsafeMutableRawBufferPointer(buffer), file: file, offset: offset)
                initialized = valid.header.valueLength
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return value
    }
}
