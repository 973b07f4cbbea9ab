/// Reads one segment file — its header, every valid record, and what each other byte range is —
/// and is the one statement of how a segment's bytes are classified (FORMAT.md, "Reading a store").
/// Recovery on open, `verify`, `inspect`, repair, the compactor and the hint writer all read
/// segments through it, so no two of them can disagree about the same bytes:
///
/// - A **valid record**: its lengths are within ``Limits`` and its checksum matches. After bytes
///   that are not one, the reader tries every following offset until a valid record starts there
///   (or the file ends) and reports the skipped bytes as one range.
/// - A skipped range that reaches the end of the file is **reserved space** when it is at most
///   ``StoreWriter/maxReservedSpace`` bytes of zeros (no records, and no damage, in any segment);
///   otherwise a **torn tail** in the active segment (a write a crash interrupted, or one still in
///   progress: a writer's open cuts it) and **damage** in any other.
/// - **Batch members** whose batch does not complete (``BatchAssembler``) are never applied: when
///   nothing but they (and a torn tail) follow the first of them in the active segment, they are
///   part of its torn tail; anywhere else they are damage, as is the commit record of a batch
///   whose members are not all there.
/// - The **header**: an invalid one is damage at bytes `0 ..< 40` (`16 ..< 24` when only its
///   segment id disagrees with the file name); an active segment of at most 40 bytes with an
///   invalid header is a torn creation (a torn tail from offset 0). Another format version or header
///   length is not damage but a store this Cask cannot read: an error.
///
/// **Beside a live writer** (a read-only open, `verify`) the active segment grows as it is read.
/// There, bytes that are not a valid record are read again before they are called anything, and
/// again once a valid record is found after them: writes land in file order, so a write that was in
/// progress when they were first read has landed by then. Only a write still in progress at the
/// very end can show, as a torn tail.
///
/// Reads through a 1 MiB window (larger only for a larger record). Not thread-safe; one reader per
/// file and thread.
package struct SegmentReader: ~Copyable {
    /// What a read of the records found besides them.
    package struct Outcome {
        /// Every damaged range, the header's first, then in file order.
        package var damage: [DamagedRange]
        /// Where the segment's contents end: the end of the file, or where its reserved space or its
        /// torn tail starts (where a writer's open truncates the active segment).
        package var contentEnd: Int64
        /// Where the file ended as read: sooner than its length at the start when a live writer gave
        /// its reserved space back meanwhile.
        package var fileLength: Int64
        /// Valid records read (batch members of incomplete batches included).
        package var records: Int

        /// The torn tail, if the segment has one.
        package var tornTail: DamagedRange? { damage.last.flatMap { $0.kind == .tornTail ? $0 : nil } }
        /// Damage other than a torn tail.
        package var damageInside: [DamagedRange] { damage.filter { $0.kind != .tornTail } }
    }

    package let id: UInt64
    package let path: String
    /// Whether this is the store's active segment (``StoreDirectory/activeSegment``).
    package let isActive: Bool
    /// Whether another process may be appending to the file as it is read (the active segment,
    /// read without the store's lock: a read-only open, `verify`, `inspect`): bad bytes there are
    /// read again before they are called anything.
    package let mayGrow: Bool
    private let fd: Int32
    private let fileSystem: any FileSystem
    package private(set) var fileLength: Int64
    private var window = ByteBuffer(capacity: 1 << 20)
    private var windowStart: Int64 = 0
    private static let windowSize = 1 << 20
    private var headerDamage: DamagedRange?

    /// The store's encryption (nil: not encrypted): an encrypted segment's header is checked with it
    /// and gives the segment's cipher.
    private let encryption: StoreEncryption?
    /// The segment's cipher and salt, once its header gave them (or given): every record must be
    /// sealed with it. Nil for a store that is not encrypted.
    package private(set) var sealing: SegmentSealing?
    private var cipher: FileCipher? { sealing?.cipher }
    /// The key prefix the segment's header names (empty for none, and while the header is not read
    /// or is damaged: records that elide key bytes are then invalid). Callers rebuild a record's key
    /// with it (``RecordHeader/withKey(in:prefix:_:)``).
    package private(set) var keyPrefix: [UInt8] = []

    /// Behind a damaged header (none was read), takes `keyPrefix` — the one the segment's valid
    /// hint holds — as the segment's, so that the records that elide it read: the header is then
    /// the version 4 header that holds it, and the records start after it.
    package mutating func takeKeyPrefix(fromHint keyPrefix: [UInt8]) {
        guard var damage = headerDamage, damage.kind == .segmentHeader, encryption == nil, !keyPrefix.isEmpty else { return }
        self.keyPrefix = keyPrefix
        contentStart = Int64(SegmentHeader.byteCount(encrypted: false, keyPrefixLength: keyPrefix.count))
        damage.length = min(fileLength, contentStart)
        headerDamage = damage
    }

    /// The key of a record this reader delivered: its header and its plain bytes.
    package func key(of header: RecordHeader, in bytes: UnsafeRawBufferPointer) -> [UInt8] {
        keyPrefix.withUnsafeBytes { header.key(in: bytes, prefix: $0) }
    }
    /// Where the records start: the end of the header (40 bytes, or 108 in an encrypted store).
    package private(set) var contentStart: Int64
    /// Set when the whole segment is damage (an encrypted store's segment whose header does not
    /// authenticate) or a torn creation: no record of it is read.
    private var unreadable = false
    /// A sealed record's plain form (header, key, payload): what ``record(at:)`` hands on for it.
    private var plain = ByteBuffer(capacity: 4096)

    /// A reader of the segment open as `fd` (which stays the caller's), `length` bytes long.
    /// `lockHeld`: the reader holds the store's lock, so nobody writes the file meanwhile.
    /// `encryption`: the store's (nil when it is not encrypted); ``readHeader()`` then finds the
    /// segment's cipher. `sealing`: the segment's, when its header was read before (a segment file
    /// the store holds): the reader then reads records without reading the header.
    package init(
        fd: Int32, id: UInt64, path: String, length: Int64, isActive: Bool, lockHeld: Bool, encryption: StoreEncryption?,
        sealing: SegmentSealing? = nil, fileSystem: any FileSystem
    ) {
        mayGrow = isActive && !lockHeld
        self.fd = fd
        self.id = id
        self.path = path
        self.fileLength = length
        self.isActive = isActive
        self.fileSystem = fileSystem
        self.encryption = encryption
        self.sealing = sealing
        contentStart = Int64(encryption == nil ? SegmentHeader.length : SegmentHeader.encryptedLength)
    }

    /// A reader of `file`, a segment the store holds (whose header it read when it opened it).
    package init(file: SegmentFile, length: Int64, isActive: Bool, lockHeld: Bool, encryption: StoreEncryption?, fileSystem: any FileSystem) {
        self.init(
            fd: file.fd, id: file.id, path: file.path, length: length, isActive: isActive, lockHeld: lockHeld, encryption: encryption,
            sealing: file.sealing, fileSystem: fileSystem)
        keyPrefix = file.keyPrefix
        contentStart = file.contentStart
    }

    /// What the segment's hint file is checked with: nil for a store that is not encrypted (or a
    /// segment whose header gave no cipher).
    package var hintSealing: HintFile.Sealing? {
        guard let encryption, let sealing else { return nil }
        return HintFile.Sealing(encryption: encryption, segmentSalt: sealing.salt)
    }

    // MARK: The header

    /// Reads and checks the header. Returns it when it is usable (valid, if perhaps naming another
    /// segment id: the file name's is used), with any damage it shows; nil and the damage when not.
    /// Throws when the read fails, and for another format version or header length.
    ///
    /// In an encrypted store a header that does not authenticate — damaged, another store's or
    /// another key's, not encrypted, or naming another segment id (a segment swapped with another)
    /// — makes the whole segment damage: none of its records is read, for nothing in it can be
    /// told apart from bytes anyone could have written.
    package mutating func readHeader() throws(CaskError) -> (header: SegmentHeader?, damage: DamagedRange?) {
        let length = fileLength
        let headerLength = Int64(encryption == nil ? SegmentHeader.length : SegmentHeader.encryptedLength)
        let decoded = try SegmentHeader.read(fd: fd, path: path, encryption: encryption, fileSystem: fileSystem)
        if isActive, case .failure(let problem) = decoded, try isTornCreation(problem, length: length, headerLength: headerLength) {
            // No record is in it: its bytes are one torn tail, not scanned for records as well.
            unreadable = true
            headerDamage = DamagedRange(
                kind: .tornTail, file: path, segmentID: id, offset: 0, length: length,
                reason: "segment header is incomplete (\(problem.explanation)): its creation was torn")
            return (nil, headerDamage)
        }
        switch decoded {
        case .success(let (header, cipher)):
            if header.segmentID != id {
                if encryption != nil {
                    markUnreadable("the header is authentic but names segment \(header.segmentID), the file name \(id): the segment was renamed or swapped with another")
                    return (nil, headerDamage)
                }
                headerDamage = DamagedRange(kind: .segmentHeader, file: path, segmentID: id, offset: 16, length: 8, reason: "header names segment \(header.segmentID), file name says \(id)")
            }
            if let cipher, let salt = header.sealing?.salt { sealing = SegmentSealing(cipher: cipher, salt: salt) }
            keyPrefix = header.keyPrefix
            contentStart = Int64(header.byteCount)
            return (header, headerDamage)
        case .failure(.unsupportedVersion(let version)):
            throw CaskError.unsupportedFormat(path: path, version: version)
        case .failure(.unsupportedHeaderLength(let headerLength)):
            throw CaskError.corruptFile(path: path, reason: SegmentHeader.Problem.unsupportedHeaderLength(headerLength).explanation)
        case .failure(.unknownAlgorithm(let code)):
            throw CaskError.corruptFile(path: path, reason: SegmentHeader.Problem.unknownAlgorithm(code).explanation)
        case .failure(.keyRequired):
            throw CaskError.encryptionKeyRequired(path: path)
        case .failure(let problem) where encryption != nil:
            markUnreadable("invalid segment header (\(problem.explanation))")
        case .failure(let problem):
            headerDamage = DamagedRange(
                kind: .segmentHeader, file: path, segmentID: id, offset: 0, length: min(length, Int64(SegmentHeader.length)),
                reason: "invalid segment header (\(problem.explanation))")
        }
        return (nil, headerDamage)
    }

    /// Whether an active segment whose header did not decode (`problem`) is one whose creation was
    /// torn, so that no record can be in it: at most `headerLength` bytes (the header of versions 1
    /// to 3, or less); or, in a store that is not encrypted, at most a version 4 header's length and
    /// either all zeros (its length reached the disk, its bytes did not) or a version 4 header cut
    /// short with no valid record anywhere after byte 40. (The key prefix length that makes it
    /// short is under no checksum: a record after it means the header was written whole and damaged
    /// since, and the segment is read as any damaged one is.)
    private mutating func isTornCreation(_ problem: SegmentHeader.Problem, length: Int64, headerLength: Int64) throws(CaskError) -> Bool {
        if length <= headerLength { return true }
        guard encryption == nil, length <= Int64(SegmentHeader.maxLength) else { return false }
        let bytes = try view(at: 0, count: Int(length))
        guard bytes.count == Int(length) else { return false }
        if bytes.allSatisfy({ $0 == 0 }) { return true }
        guard problem == .tooShort else { return false }
        for offset in SegmentHeader.length..<bytes.count {
            // Any record, whatever prefix it would need.
            if case .success = RecordHeader.validate(UnsafeRawBufferPointer(rebasing: bytes[offset...]), keyPrefixLength: Limits.maxKeyPrefixLength) {
                return false
            }
        }
        return true
    }

    /// Makes the whole file one damaged range, its header's: no record of it is read.
    private mutating func markUnreadable(_ reason: String) {
        unreadable = true
        headerDamage = DamagedRange(
            kind: .segmentHeader, file: path, segmentID: id, offset: 0, length: fileLength,
            reason: "\(reason); none of the segment's \(fileLength) bytes is read")
    }

    // MARK: The records

    /// Reads the records from `start` (the end of the header, or of what the segment's hint file
    /// covers) to the end of the file. `batch` holds the members already read (from the hint) and
    /// comes back empty; `settled`: where the last record before `start` that is not a batch member
    /// ends (default `start`). `onRecord` gets every valid record: its offset, header and plain
    /// form — its header, key and payload, `header.payloadEnd` bytes: a sealed record's decrypted,
    /// without its tag (valid only during the call); `onBatch` the members of each whole batch, at its commit record
    /// (after `onRecord` for it), in write order; `onDamage` each damaged range (the header's first)
    /// as soon as it is known — a range inside the file once a valid record follows it, the rest at
    /// the end — so that a caller can report the segment in file order without holding it.
    /// Throws only when a read fails.
    package mutating func readRecords(
        from start: Int64, settled: Int64? = nil, batch: inout BatchAssembler,
        onRecord: (_ offset: Int64, RecordHeader, UnsafeRawBufferPointer) -> Void,
        onDamage: (DamagedRange) -> Void = { _ in },
        onBatch: ([BatchAssembler.Member]) -> Void = { _ in }
    ) throws(CaskError) -> Outcome {
        var damage: [DamagedRange] = []
        var reported = 0  // `damage[..<reported]` went to `onDamage` already.
        if let headerDamage { onDamage(headerDamage) }
        if unreadable {
            batch = BatchAssembler()
            return Outcome(damage: headerDamage.map { [$0] } ?? [], contentEnd: fileLength, fileLength: fileLength, records: 0)
        }
        var records = 0
        // The end of the last record that is not a batch member: members held at the end that all
        // come after it (and after any damage but a torn tail) end the segment.
        var settledEnd = settled ?? start
        var position = min(start, fileLength)
        while position < fileLength {
            var found = try record(at: position)
            if case .failure = found, mayGrow {
                // Perhaps a write in progress: read it again (the window may be older than the file).
                dropWindow()
                found = try record(at: position)
            }
            let problem: RecordHeader.Problem
            switch found {
            case .success(let (header, bytes)):
                // Every range found so far is followed by this record: none can end the file.
                while reported < damage.count {
                    onDamage(damage[reported])
                    reported += 1
                }
                records += 1
                deliver(position, header, bytes, batch: &batch, damage: &damage, settledEnd: &settledEnd, onRecord: onRecord, onBatch: onBatch)
                position += Int64(header.recordLength)
                continue
            case .failure(let failure):
                problem = failure
            }
            // A live writer gave back its reserved space meanwhile, and the file now ends here.
            if position >= fileLength { break }
            var next = position + 1
            // Zeros to the end (reserved space, or the zeroed extents a power cut can leave) hold no
            // record, type 0 being invalid: the search would try each of their offsets in vain.
            if try isAllZero(from: next, to: fileLength) { next = fileLength }
            while next < fileLength {
                if case .success = try record(at: next) { break }
                next += 1
            }
            // The same, found during the scan.
            if position >= fileLength { break }
            next = min(next, fileLength)
            if mayGrow && next < fileLength {
                // A valid record after the bad bytes: a write in progress there has landed by now.
                dropWindow()
                if case .success = try record(at: position) { continue }
                // Or the file shrank meanwhile (reserved space given back): the range ends with it.
                if position >= fileLength { break }
                next = min(next, fileLength)
            }
            damage.append(DamagedRange(kind: .record, file: path, segmentID: id, offset: position, length: next - position, reason: problem.description))
            position = next
        }

        // What ends the file.
        var contentEnd = fileLength
        // Only bytes that are not records (never an incomplete batch's valid records) end a file.
        if let last = damage.last, last.kind == .record, last.end == fileLength {
            if try isReservedSpace(from: last.offset, to: fileLength) {
                damage.removeLast()
                contentEnd = last.offset
            } else if isActive {
                damage[damage.count - 1].kind = .tornTail
                contentEnd = last.offset
            }
        }
        if contentEnd > fileLength { contentEnd = fileLength }  // The file shrank (reserved space given back).

        // Members whose batch never completed.
        let held = batch.pending.sorted { $0.location.offset < $1.location.offset }
        batch = BatchAssembler()
        if let first = held.first.map({ Int64($0.location.offset) }) {
            let onlyTornTailAfter = !damage.contains { $0.kind != .tornTail && $0.end > first }
            if isActive && first >= settledEnd && onlyTornTailAfter {
                let tailEnd = damage.last?.kind == .tornTail ? damage.removeLast().end : contentEnd
                damage.append(DamagedRange(
                    kind: .tornTail, file: path, segmentID: id, offset: first, length: tailEnd - first,
                    reason: "\(held.count) record\(held.count == 1 ? "" : "s") of a batch without its commit record"))
                contentEnd = first
            } else {
                damage += Self.runs(of: held, in: path, reason: "of a batch without its commit record (never applied)")
            }
        }
        let known = damage[..<reported]
        let remaining = damage[reported...].sorted { $0.offset < $1.offset }
        for range in remaining { onDamage(range) }
        damage = (Array(known) + remaining).sorted { $0.offset < $1.offset }
        if let headerDamage { damage.insert(headerDamage, at: 0) }
        return Outcome(damage: damage, contentEnd: contentEnd, fileLength: fileLength, records: records)
    }

    /// Hands one valid record to the callbacks, holding batch members until their commit record.
    private func deliver(
        _ offset: Int64, _ header: RecordHeader, _ bytes: UnsafeRawBufferPointer, batch: inout BatchAssembler, damage: inout [DamagedRange],
        settledEnd: inout Int64, onRecord: (Int64, RecordHeader, UnsafeRawBufferPointer) -> Void, onBatch: ([BatchAssembler.Member]) -> Void
    ) {
        onRecord(offset, header, bytes)
        let location = RecordLocation(segmentID: UInt32(id), offset: UInt32(offset), length: UInt32(header.recordLength))
        if header.flags & RecordFlags.batchMember != 0 {
            batch.hold(.init(
                key: key(of: header, in: bytes), type: header.type, seq: header.seq, valueLength: header.valueLength,
                expiresAt: header.expiresAt, location: location))
            return
        }
        settledEnd = offset + Int64(header.recordLength)
        guard header.type == .batch else { return }
        let firstSeq = BatchAssembler.firstSeq(ofCommitKey: UnsafeRawBufferPointer(rebasing: bytes[header.storedKeyRange]))
        let count = Self.memberCount(ofCommit: header, bytes)
        switch batch.commit(firstSeq: firstSeq, commitSeq: header.seq, count: count ?? 0) {
        case .whole(let members):
            onBatch(members)
        case .incomplete(let found, let expected):
            damage += Self.incompleteBatch(found: found, expected: expected, commitSeq: header.seq, commitAt: location, count: .some(count), in: path)
        }
    }

    /// The member count a commit record's value states (FORMAT.md, "Batches": a varint and nothing
    /// else), nil if the value is not exactly one varint. `bytes`: the whole record, as delivered.
    package static func memberCount(ofCommit header: RecordHeader, _ bytes: UnsafeRawBufferPointer) -> UInt64? {
        let valueEnd = header.payloadEnd
        var valueOffset = header.payloadRange.lowerBound
        let count = Varint.read(UnsafeRawBufferPointer(rebasing: bytes[0..<valueEnd]), at: &valueOffset)
        return valueOffset == valueEnd ? count : nil
    }

    /// Whether bytes `start ..< end` of the file, which run to its end, are space a writer
    /// reserved ahead of its writes (FORMAT.md, "Reserved space"): at most
    /// ``StoreWriter/maxReservedSpace`` bytes, all zero (up to where the file ends, if it shrank
    /// meanwhile).
    private mutating func isReservedSpace(from start: Int64, to end: Int64) throws(CaskError) -> Bool {
        // More zeros than a writer ever reserves ahead are lost records (a power cut), not space.
        end - start <= StoreWriter.maxReservedSpace ? try isAllZero(from: start, to: end) : false
    }

    /// Whether bytes `start ..< end` of the file, which run to its end, are all zero (up to where
    /// the file ends, if it shrank meanwhile: `fileLength` is then its new length). Reads them in
    /// 64 KiB pieces, and stops at the first piece with another byte.
    private mutating func isAllZero(from start: Int64, to end: Int64) throws(CaskError) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var position = start
        while position < end {
            let count = Int(min(Int64(buffer.count), end - position))
            let read: Int
            do {
                read = try buffer.withMutableBytes { (raw) throws(Errno) in
                    try fileSystem.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]), at: position)
                }
            } catch {
                throw CaskError.io(operation: "pread", path: path, errno: error)
            }
            guard buffer[0..<read].allSatisfy({ $0 == 0 }) else { return false }
            if read < count {
                // The file ends sooner: its writer gave the space back meanwhile.
                fileLength = position + Int64(read)
                return true
            }
            position += Int64(count)
        }
        return true
    }

    /// The valid record at `offset`, or why there is none.
    private mutating func record(at offset: Int64) throws(CaskError) -> Result<(RecordHeader, UnsafeRawBufferPointer), RecordHeader.Problem> {
        let headerView = try view(at: offset, count: Limits.maxRecordHeaderLength)
        let header: RecordHeader
        switch RecordHeader.parse(headerView, keyPrefixLength: keyPrefix.count) {
        case .success(let parsed): header = parsed
        case .failure(let problem): return .failure(problem)
        }
        guard Int64(header.recordLength) <= fileLength - offset else {
            return .failure(.truncated(needed: header.recordLength))
        }
        let bytes = try view(at: offset, count: header.recordLength)
        switch RecordHeader.validate(bytes, keyPrefixLength: keyPrefix.count) {
        case .success(let validated):
            guard validated.isEncrypted == (cipher != nil) else {
                return .failure(.malformed(cipher != nil ? "record is not encrypted, in an encrypted segment" : "encrypted record in a segment that is not encrypted"))
            }
            guard let cipher else { return .success((validated, bytes)) }
            return open(bytes, header: validated, at: offset, cipher: cipher)
        case .failure(let problem): return .failure(problem)
        }
    }

    /// The plain form of the sealed record `bytes` at `offset` (its header, then its key and payload
    /// decrypted, no tag; valid until the next call), or `.notAuthentic`.
    private mutating func open(
        _ bytes: UnsafeRawBufferPointer, header: RecordHeader, at offset: Int64, cipher: FileCipher
    ) -> Result<(RecordHeader, UnsafeRawBufferPointer), RecordHeader.Problem> {
        if plain.capacity > 1 << 20 && header.payloadEnd <= 1 << 20 { plain.reset(shrinkingTo: 4096) }  // not pinned by one huge record
        plain.count = 0
        var authentic = false
        plain.appendWithUnsafeSpace(header.payloadEnd) { space in
            let base = space.baseAddress!
            base.copyMemory(from: bytes.baseAddress!, byteCount: header.headerLength)
            authentic = cipher.open(
                UnsafeRawBufferPointer(rebasing: bytes[header.headerLength..<header.payloadEnd]), tag: bytes.baseAddress! + header.payloadEnd,
                associatedData: UnsafeRawBufferPointer(rebasing: bytes[4..<header.headerLength]), number: UInt64(offset),
                into: base + header.headerLength)
            return header.payloadEnd
        }
        guard authentic else { return .failure(.notAuthentic) }
        return .success((header, plain.withUnsafeBytes { $0 }))
    }

    /// Forgets the window, so that the next read sees the file as it is now.
    private mutating func dropWindow() {
        window.count = 0
        windowStart = 0
    }

    /// Up to `count` bytes at `offset` (fewer only at end of file), valid until the next call.
    private mutating func view(at offset: Int64, count: Int) throws(CaskError) -> UnsafeRawBufferPointer {
        let available = Int(max(0, min(Int64(count), fileLength - offset)))
        if available == 0 { return UnsafeRawBufferPointer(start: nil, count: 0) }
        if offset < windowStart || offset + Int64(available) > windowStart + Int64(window.count) {
            let length = Int(min(Int64(max(count, Self.windowSize)), fileLength - offset))
            window.count = 0
            window.reserve(length)
            let read: Int
            do {
                read = try window.withUnsafeMutableCapacity { (space) throws(Errno) in
                    try fileSystem.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: space[0..<length]), at: offset)
                }
            } catch {
                throw CaskError.io(operation: "pread", path: path, errno: error)
            }
            window.count = read
            windowStart = offset
            if read < length {
                // The file shrank since its length was taken: a writer that has the store open gave
                // back the space it had reserved (a read-only read of a live store). It ends here,
                // or sooner (a read of nothing says only that it ends at or before `offset`).
                let now = (try? fileSystem.fileSize(fd)) ?? (offset + Int64(read))
                fileLength = min(offset + Int64(read), now)
                let kept = Int(max(0, min(Int64(min(read, count)), fileLength - offset)))
                return window.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[0..<kept]) }
            }
        }
        let start = Int(offset - windowStart)
        return window.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[start..<(start + available)]) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
