#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension CaskStore {
    /// How far ``repair(at:dryRun:backupDirectory:progress:)`` has got: bytes done of bytes to do,
    /// per phase.
    public struct RepairProgress: Sendable, Equatable {
        public enum Phase: String, Sendable, Equatable {
            /// Reading every segment and hint file (the whole of a dry run).
            case checking
            /// Copying the files about to change into the backup directory.
            case backingUp = "backing up"
            /// Writing the repaired files.
            case repairing
        }

        public var phase: Phase
        public var done: Int64
        public var total: Int64
    }

    /// Repairs a damaged store in `directory`, which no process may have open: afterwards
    /// ``verify(at:progress:)`` finds it clean, and opening it cuts and skips nothing.
    ///
    /// What it does, in this order (each step durable before the next; `FORMAT.md` says what each
    /// file means):
    /// 1. Finishes an interrupted compaction: a valid `COMPACTION` manifest's segments are removed
    ///    (hints first), then the manifest, as a writable open would. An invalid manifest (which every
    ///    open ignores) is removed.
    /// 2. Removes leftover `*.tmp` files and hint files whose segment does not exist.
    /// 3. Repairs each damaged segment: a damaged tail is cut (`ftruncate`, `fdatasync`); any other
    ///    damage — a damaged header, damaged ranges inside, a value that does not decompress, batch
    ///    members whose commit record is gone (never applied) — makes it rewritten: a valid header,
    ///    then every other record the segment holds **copied byte for byte**, the records found
    ///    after each damaged range included. It is written as `NNNNNNNNNN.cask.tmp`, synced, renamed
    ///    over the segment, and the directory is synced; its hint file, if it had one, is removed
    ///    first and written again last.
    /// 4. Writes again every hint file that is invalid or disagrees with its segment.
    ///
    /// **Backup.** Before changing anything it copies every file it will change or remove into
    /// `backupDirectory` (which must not exist, or be empty), syncs the copies and the directory.
    /// By default that is a new directory next to the store, `<store>.cask-backup-<UTC time>`
    /// (outside the store directory, so nothing that cleans a store touches it). It creates no file
    /// in the store directory (hint files are rebuilt only where one existed), so copying the backup
    /// back over the store directory restores the store exactly. The `LOCK` file is neither copied
    /// nor restored: it holds only the pid of the process that has the store open.
    ///
    /// **Deletes.** A delete (or batch commit) whose record lies in a damaged range is rebuilt byte
    /// for byte when the segment's hint file describes it and agrees with every intact record of
    /// the segment: a hint entry holds every field of such a record, so its key stays deleted. A
    /// damaged delete that no such hint vouches for cannot be told from other damaged bytes: the
    /// repair never makes up a record from damaged bytes, so an older put of its key stays visible —
    /// as it already was to every open of the damaged store, which skips damaged ranges. Records
    /// lost this way are listed in ``RepairReport/lostRecords`` (with `verified: false` when only
    /// the damaged bytes name them): check those keys.
    ///
    /// With `dryRun` it changes nothing — not even the lock file — and returns the same report.
    /// Takes the store's lock (a dry run takes it too, without writing its pid), so it throws
    /// ``CaskError/locked(path:holderPID:)`` while another process has the store open for writing.
    /// Throws ``CaskError/unsupportedFormat(path:version:)`` without changing anything when a
    /// segment was written by another version of Cask. A crash or an I/O error part way leaves the
    /// store readable (each step is atomic) and the backup complete; running the repair again
    /// finishes it. `progress` is called on the calling thread.
    /// Complexity: one read of every segment; one write of each segment it rewrites.
    public static func repair(
        at directory: String, dryRun: Bool = false, backupDirectory: String? = nil,
        progress: ((RepairProgress) -> Void)? = nil
    ) throws(CaskError) -> RepairReport {
        try StoreRepair(directory: directory, fileSystem: PosixFileSystem())
            .run(dryRun: dryRun, backupDirectory: backupDirectory, progress: progress)
    }
}

/// The work behind ``CaskStore/repair(at:dryRun:backupDirectory:progress:)``: reads the store into
/// a plan (the report, and what to write), then backs up and applies it.
package struct StoreRepair {
    let directory: String
    let fileSystem: any FileSystem

    package init(directory: String, fileSystem: any FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
    }

    package func run(
        dryRun: Bool, backupDirectory: String?, progress: ((CaskStore.RepairProgress) -> Void)?
    ) throws(CaskError) -> RepairReport {
        switch fileSystem.isDirectory(directory) {
        case .some(true): break
        case .some(false): throw CaskError.io(operation: "repair", path: directory, errno: .notDirectory)
        case .none: throw CaskError.directoryMissing(path: directory)
        }
        if !dryRun && !fileSystem.isWritable(directory) {
            throw CaskError.notWritable(path: directory, errno: .permissionDenied)
        }
        let lock: StoreLock?
        let probe: Int32?
        if dryRun {
            lock = nil
            probe = try lockWithoutWriting()
        } else {
            lock = try StoreLock(directory: directory, fileSystem: fileSystem)
            probe = nil
        }
        defer {
            lock?.release()
            if let probe { fileSystem.close(probe) }
        }

        var plan = try makePlan(progress: progress)
        plan.report.dryRun = dryRun
        guard !plan.report.changes.isEmpty else { return plan.report }
        let backup = backupDirectory.map(Self.trimmingSlashes) ?? defaultBackupDirectory()
        if backup == Self.trimmingSlashes(directory) {
            throw CaskError.io(operation: "back up the store into itself", path: backup, errno: .exists)
        }
        plan.report.backupDirectory = backup
        if dryRun { return plan.report }
        try makeBackup(of: plan.backupFiles, in: backup, progress: progress)
        try apply(&plan, progress: progress)
        return plan.report
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    // MARK: The lock

    /// A dry run changes nothing, the lock file included: it takes the lock on `LOCK` without
    /// writing its pid, and without creating the file (when there is none, no writer has the store).
    /// A `LOCK` this process may not read (another user's store) is not taken either: the dry run
    /// then reads the store as `verify` does, alongside any writer.
    private func lockWithoutWriting() throws(CaskError) -> Int32? {
        let lockPath = path(SegmentName.lockFile)
        let fd: Int32
        do { fd = try fileSystem.open(lockPath, flags: O_RDONLY, mode: 0) } catch {
            if error == .noEntry || error == .permissionDenied { return nil }
            throw CaskError.from(error, operation: "open", path: lockPath)
        }
        do { try fileSystem.lock(fd, exclusive: true) } catch {
            defer { fileSystem.close(fd) }
            if error == .wouldBlock {
                throw CaskError.locked(path: directory, holderPID: StoreLock.readPID(fd: fd, fileSystem: fileSystem))
            }
            throw CaskError.from(error, operation: "flock", path: lockPath)
        }
        return fd
    }

    // MARK: Planning

    /// What to do, and the report that says it.
    private struct Plan {
        var report: RepairReport
        /// Files to remove before the segments are repaired, in order, each followed by a directory
        /// sync where `syncAfter` says so (a compaction's inputs before its manifest).
        var removals: [(name: String, syncAfter: Bool)] = []
        var segments: [SegmentRepair] = []
        /// Every file that changes or goes, by name: what the backup holds.
        var backupFiles: [String] = []
    }

    private enum Piece {
        /// Bytes of the old segment, copied as they are.
        case copy(offset: Int64, length: Int64)
        /// A record rebuilt from the hint file.
        case bytes([UInt8])

        var length: Int64 {
            switch self {
            case .copy(_, let length): length
            case .bytes(let bytes): Int64(bytes.count)
            }
        }
    }

    private struct SegmentRepair {
        var id: UInt64
        /// The new header and contents, or nil when only the hint file is rebuilt.
        var rewrite: (header: SegmentHeader, pieces: [Piece])?
        var truncateTo: Int64?
        /// The index of the hint file's change in the report, when it is rebuilt.
        var hintChange: Int?
    }

    private func makePlan(progress: ((CaskStore.RepairProgress) -> Void)?) throws(CaskError) -> Plan {
        let listing = try StoreDirectory(listing: directory, fileSystem: fileSystem)
        var plan = Plan(report: RepairReport(directory: directory))
        plan.report.ignoredFiles = listing.strays.map { "\(path($0.name)): \($0.reason)" }
        func change(_ kind: RepairReport.Change.Kind, _ name: String, _ reason: String) throws(CaskError) {
            plan.report.changes.append(.init(kind: kind, file: path(name), bytesBefore: try size(of: name), bytesAfter: 0, reason: reason))
            plan.backupFiles.append(name)
        }
        let ids = listing.segmentIDs

        // 1. An interrupted compaction.
        switch listing.manifest {
        case .valid(let inputs)?:
            let retired = Set(listing.retiredIDs)
            for id in inputs where retired.contains(id) {
                for name in [SegmentName.hint(id), SegmentName.segment(id)] where fileSystem.isDirectory(path(name)) == false {
                    try change(.finishCompaction, name, "segment \(id) was replaced by a compaction that did not get to remove it (the compaction manifest lists it)")
                    plan.removals.append((name, false))
                }
            }
            if !plan.removals.isEmpty { plan.removals[plan.removals.count - 1].syncAfter = true }
            try change(.finishCompaction, CompactionManifest.fileName, "the compaction manifest, once every segment it lists is gone")
            plan.removals.append((CompactionManifest.fileName, true))
        case .invalid(let reason)?:
            try change(.removeFile, CompactionManifest.fileName, reason.replacingOccurrences(of: "; ignored", with: " (every open ignores it)"))
            plan.removals.append((CompactionManifest.fileName, true))
        case nil:
            break
        }

        // 2. Leftovers.
        let leftoversStart = plan.removals.count
        for name in listing.leftovers {
            try change(.removeLeftover, name, "leftover temporary file of an interrupted write")
            plan.removals.append((name, false))
        }
        for id in listing.orphanHintIDs {
            try change(.removeFile, SegmentName.hint(id), "hint file without a segment \(SegmentName.segment(id))")
            plan.removals.append((SegmentName.hint(id), false))
        }
        if plan.removals.count > leftoversStart { plan.removals[plan.removals.count - 1].syncAfter = true }

        // 3. Segments and their hints.
        var meter = Meter(phase: .checking, total: 0, report: progress)
        for id in ids { meter.total += (try? size(of: SegmentName.segment(id))) ?? 0 }
        meter.report(0)
        var segments: [SegmentAnalysis] = []
        for id in ids {
            let analysis = try analyseSegment(id, of: listing, meter: &meter)
            plan.report.segmentsChecked += 1
            plan.report.recordsChecked += analysis.records.count
            plan.report.bytesChecked += analysis.length
            segments.append(analysis)
        }
        // Sequence numbers never go backwards: a header written anew with nothing to go by starts above them all.
        let nextSeq = segments.reduce(UInt64(1)) { max($0, $1.nextSeq) }
        for segment in segments {
            planSegment(segment, nextSeq: nextSeq, into: &plan)
        }
        return plan
    }

    private func size(of name: String) throws(CaskError) -> Int64 {
        do throws(Errno) {
            let fd = try fileSystem.open(path(name), flags: O_RDONLY, mode: 0)
            defer { fileSystem.close(fd) }
            return try fileSystem.fileSize(fd)
        } catch {
            throw CaskError.from(error, operation: "stat", path: path(name), reading: true)
        }
    }

    private func readAll(_ filePath: String, limit: Int64) throws(Errno) -> [UInt8]? {
        let fd = try fileSystem.open(filePath, flags: O_RDONLY, mode: 0)
        defer { fileSystem.close(fd) }
        let size = try fileSystem.fileSize(fd)
        guard size <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }
        return read == bytes.count ? bytes : nil
    }

    // MARK: Reading a segment

    /// A valid record as the scan found it (its bytes stay on disk).
    private struct ScannedRecord {
        var offset: Int64
        var length: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var valueLength: Int
        var expiresAt: UInt64?
        var key: [UInt8]
        /// For a batch commit record: the first seq of its batch.
        var batchFirstSeq: UInt64
        /// Why the record cannot be read although its checksum holds (a value that does not decompress).
        var payloadProblem: String?
    }

    /// A hint file entry for a record inside a damaged range.
    private struct HintedRecord {
        var offset: Int64
        var length: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var valueLength: Int
        var key: [UInt8]
    }

    private struct SegmentAnalysis {
        var id: UInt64
        var path: String
        var length: Int64
        var header: Result<SegmentHeader, SegmentHeader.Problem>
        var records: [ScannedRecord] = []
        var corrupt: [SegmentReader.Damage] = []
        var hasHint: Bool
        /// Nil when the hint file is valid and agrees with the segment record for record.
        var hintProblem: String?
        /// Entries of a hint file that agrees with every intact record, for records inside damaged ranges.
        var hinted: [HintedRecord] = []
        /// Records that damaged ranges no trusted hint describes appear to have held (unverified).
        var suspected: [RepairReport.LostRecord] = []
        /// One more than the highest seq the segment holds or had, at least its header's base seq.
        var nextSeq: UInt64 = 1
        /// Why the header is invalid, as the reader put it.
        var headerReason: String?
    }

    private func analyseSegment(_ id: UInt64, of listing: StoreDirectory, meter: inout Meter) throws(CaskError) -> SegmentAnalysis {
        let segmentPath = listing.segmentPath(id)
        var analysis = SegmentAnalysis(id: id, path: segmentPath, length: 0, header: .failure(.tooShort), hasHint: listing.hintedIDs.contains(id))
        var records: [ScannedRecord] = []
        let start = meter.done
        let read = try SegmentReader.read(
            segment: id, of: listing, fileSystem: fileSystem,
            onOpen: { length, header in
                analysis.length = length
                if let header { analysis.header = .success(header) }
            },
            onRecord: { offset, header, bytes in
                let key = bytes[header.headerLength..<(header.headerLength + header.keyLength)]
                records.append(ScannedRecord(
                    offset: offset, length: Int64(header.recordLength), type: header.type, flags: header.flags, seq: header.seq,
                    valueLength: header.valueLength, expiresAt: header.expiresAt, key: Array(key),
                    batchFirstSeq: header.type == .batch ? Self.littleEndian(key) : 0,
                    payloadProblem: StoreVerifier.payloadProblem(header, bytes)))
                meter.advance(to: start + offset + Int64(header.recordLength))
            })
        guard let outcome = read else {
            throw CaskError.io(operation: "open", path: segmentPath, errno: .noEntry)
        }
        meter.advance(to: start + analysis.length, force: true)
        if case .failure = analysis.header, let damage = outcome.damage.first, damage.kind != .tornTail {
            analysis.header = .failure(.badChecksum)
            analysis.headerReason = damage.reason
        }
        analysis.records = records
        // Damage other than the header's: the header is judged by itself below.
        analysis.corrupt = outcome.damage.filter { $0.kind != .segmentHeader }
        if case .success(let header) = analysis.header { analysis.nextSeq = header.baseSeq }
        for record in records { analysis.nextSeq = max(analysis.nextSeq, record.seq + 1) }

        if analysis.hasHint { checkHint(&analysis) }
        for entry in analysis.hinted { analysis.nextSeq = max(analysis.nextSeq, entry.seq + 1) }
        // What a damaged range held, when no trusted hint says: not for a torn tail (a write a crash
        // interrupted before it was acknowledged), nor for a batch never applied.
        let fd: Int32
        do { fd = try fileSystem.open(segmentPath, flags: O_RDONLY, mode: 0) } catch {
            throw CaskError.from(error, operation: "open", path: segmentPath, reading: true)
        }
        defer { fileSystem.close(fd) }
        for range in analysis.corrupt where range.kind == .record && !analysis.hinted.contains(where: { range.contains($0.offset) }) {
            if range.offset >= analysis.length { continue }  // A lost tail: the hint names what it held.
            if let suspect = try suspectedRecord(in: range, fd: fd, path: segmentPath) { analysis.suspected.append(suspect) }
        }
        return analysis
    }

    /// A u64 from up to 8 little-endian bytes.
    private static func littleEndian(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
    }

    /// Compares the segment's hint file with the scan. A hint that lists every intact record exactly
    /// (and nothing else outside the damaged ranges) is trusted for the records it lists inside them.
    private func checkHint(_ analysis: inout SegmentAnalysis) {
        let hintPath = path(SegmentName.hint(analysis.id))
        // The bound recovery and verify apply before reading a hint into memory.
        // A hint that describes more than the segment holds (its tail lost) is read as far as it
        // goes: its entries past the segment's end name the records lost.
        let described = max(analysis.length, declaredCoverage(hintPath, segmentID: analysis.id) ?? 0)
        let bytes: [UInt8]?
        do { bytes = try readAll(hintPath, limit: 2 * described + Int64(HintFile.maxBlockLength)) } catch {
            analysis.hintProblem = "cannot read: \(error)"
            return
        }
        guard let bytes, bytes.count >= HintFile.headerLength else {
            analysis.hintProblem = "hint file is too short or too long for its segment"
            return
        }
        var lostTail: [RepairReport.LostRecord] = []
        var byOffset: [Int64: Int] = [:]
        for (index, record) in analysis.records.enumerated() { byOffset[record.offset] = index }
        var mismatch: String?
        var listed = 0
        var hinted: [HintedRecord] = []
        let records = analysis.records, corrupt = analysis.corrupt
        let summary = bytes.withBytes { raw in
            HintFile.forEachEntry(in: raw, segmentID: analysis.id, segmentLength: described) { entry in
                guard mismatch == nil else { return }
                if entry.offset + Int64(entry.recordLength) > analysis.length {
                    lostTail.append(.init(
                        file: analysis.path, offset: entry.offset, type: entry.type, seq: entry.seq, key: Array(entry.key), verified: true))
                } else if let index = byOffset[entry.offset] {
                    let record = records[index]
                    if record.type != entry.type || record.flags != entry.flags || record.seq != entry.seq
                        || record.length != Int64(entry.recordLength) || record.valueLength != entry.valueLength
                        || record.expiresAt != entry.expiresAt || !record.key.elementsEqual(entry.key) {
                        mismatch = "the entry for the record at offset \(entry.offset) differs from it"
                    }
                    listed += 1
                } else if corrupt.contains(where: { $0.contains(entry.offset, length: Int64(entry.recordLength)) }) {
                    hinted.append(HintedRecord(
                        offset: entry.offset, length: Int64(entry.recordLength), type: entry.type, flags: entry.flags,
                        seq: entry.seq, valueLength: entry.valueLength, key: Array(entry.key)))
                } else {
                    mismatch = "the hint lists a record at offset \(entry.offset) that the segment does not hold"
                }
            }
        }
        guard let summary else {
            analysis.hintProblem = "hint file fails validation (header, block checksum or entry encoding), or describes more than the segment's \(analysis.length) bytes"
            return
        }
        if mismatch == nil && listed != records.filter({ $0.offset < summary.coveredLength }).count {
            mismatch = "the segment has records that the hint does not list"
        }
        if let mismatch {
            analysis.hintProblem = mismatch
        } else {
            analysis.hinted = hinted
            if !hinted.isEmpty { analysis.hintProblem = "the hint lists records in damaged ranges" }
            if !lostTail.isEmpty {
                // The segment lost its end: name every record the hint says was there.
                analysis.suspected += lostTail
                analysis.hintProblem = "it describes \(summary.coveredLength) bytes of a segment that holds \(analysis.length): the \(lostTail.count) record\(lostTail.count == 1 ? "" : "s") it lists past the end were lost"
            }
        }
    }

    /// The covered length a hint file's header declares (checksum valid, for this segment), if any.
    private func declaredCoverage(_ hintPath: String, segmentID: UInt64) -> Int64? {
        guard let header = try? readPrefix(hintPath, count: HintFile.headerLength),
              let summary = header.withBytes({ HintFile.declaredSummary($0) }), summary.segmentID == segmentID else { return nil }
        // Never more than a segment can be (a crafted header cannot make the read unbounded).
        return min(summary.coveredLength, Int64(UInt32.max))
    }

    private func readPrefix(_ filePath: String, count: Int) throws(Errno) -> [UInt8] {
        let fd = try fileSystem.open(filePath, flags: O_RDONLY, mode: 0)
        defer { fileSystem.close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        let read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }
        return Array(bytes[0..<read])
    }

    /// The record a damaged range seems to start with, when its header still parses (unverified:
    /// any field may be damaged).
    private func suspectedRecord(in range: SegmentReader.Damage, fd: Int32, path segmentPath: String) throws(CaskError) -> RepairReport.LostRecord? {
        var bytes = [UInt8](repeating: 0, count: Int(min(range.length, Int64(Limits.maxRecordHeaderLength + Limits.maxKeyLength))))
        let read: Int
        do { read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: range.offset) } } catch {
            throw CaskError.io(operation: "pread", path: segmentPath, errno: error)
        }
        guard case .success(let header) = bytes.withBytes({ RecordHeader.parse($0) }),
              header.type != .batch, header.headerLength + header.keyLength <= read else { return nil }
        return RepairReport.LostRecord(
            file: segmentPath, offset: range.offset, type: header.type, seq: header.seq,
            key: Array(bytes[header.headerLength..<(header.headerLength + header.keyLength)]), verified: false)
    }

    // MARK: Deciding

    /// One record of the repaired segment, in file order.
    private struct Item {
        var offset: Int64
        var length: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var batchFirstSeq: UInt64
        /// Nil: copied from the old segment; else the rebuilt bytes.
        var rebuilt: [UInt8]?
        var dropReason: String?
    }

    private func planSegment(_ segment: SegmentAnalysis, nextSeq: UInt64, into plan: inout Plan) {
        var items = segment.records.map { record in
            Item(offset: record.offset, length: record.length, type: record.type, flags: record.flags, seq: record.seq,
                 batchFirstSeq: record.batchFirstSeq, dropReason: record.payloadProblem)
        }
        var lost = segment.suspected
        for entry in segment.hinted {
            if let bytes = Self.rebuild(entry) {
                items.append(Item(offset: entry.offset, length: entry.length, type: entry.type, flags: entry.flags, seq: entry.seq,
                                  batchFirstSeq: entry.type == .batch ? Self.littleEndian(entry.key) : 0, rebuilt: bytes))
            } else {
                lost.append(.init(file: segment.path, offset: entry.offset, type: entry.type, seq: entry.seq, key: entry.key, verified: true))
            }
        }
        items.sort { $0.offset < $1.offset }

        // Records of a batch that never completed were never applied (the reader says which), and go
        // — unless the hint rebuilt the commit record that completes it.
        let unapplied = segment.corrupt.filter { $0.kind == .uncommittedBatch }
        let rebuiltBatches = items.filter { $0.rebuilt != nil && $0.type == .batch }.map { $0.batchFirstSeq..<$0.seq }
        for index in items.indices where items[index].dropReason == nil && items[index].rebuilt == nil {
            let item = items[index]
            guard unapplied.contains(where: { $0.contains(item.offset, length: item.length) }),
                  !rebuiltBatches.contains(where: { $0.contains(item.seq) }) else { continue }
            items[index].dropReason = item.type == .batch
                ? "the commit record of a batch whose members are not all there (never applied)"
                : "a member of a batch without its commit record (never applied)"
        }

        var dropped = segment.corrupt.filter { $0.kind != .uncommittedBatch && $0.offset < segment.length }.map { range in
            RepairReport.DroppedRange(
                offset: range.offset, length: range.length,
                reason: (range.kind == .tornTail ? "torn write at the end of the active segment: " : "damaged: ") + range.reason)
        }
        var pieces: [Piece] = []
        var recordsDropped = 0, recordsRestored = 0
        for item in items {
            if let reason = item.dropReason {
                dropped.append(.init(offset: item.offset, length: item.length, reason: "\(item.type) record, seq \(item.seq): \(reason)"))
                recordsDropped += 1
            } else if let bytes = item.rebuilt {
                pieces.append(.bytes(bytes))
                recordsRestored += 1
            } else if case .copy(let offset, let length)? = pieces.last, offset + length == item.offset {
                pieces[pieces.count - 1] = .copy(offset: offset, length: length + item.length)
            } else {
                pieces.append(.copy(offset: item.offset, length: item.length))
            }
        }
        dropped.sort { $0.offset < $1.offset }

        // The header.
        var header: SegmentHeader
        var headerProblem: String?
        switch segment.header {
        case .success(let decoded):
            header = SegmentHeader(segmentID: segment.id, baseSeq: decoded.baseSeq)
            if decoded.segmentID != segment.id {
                headerProblem = "its header names segment \(decoded.segmentID)"
            }
        case .failure(let problem):
            // No record in a segment has a seq below its base seq.
            let lowest = items.filter { $0.dropReason == nil }.map(\.seq).min()
            header = SegmentHeader(segmentID: segment.id, baseSeq: lowest ?? nextSeq)
            headerProblem = segment.headerReason ?? "invalid segment header (\(problem.explanation))"
        }

        let changesSegment = headerProblem != nil || !dropped.isEmpty || recordsRestored > 0
        var repair = SegmentRepair(id: segment.id)
        if changesSegment {
            let newLength = pieces.reduce(Int64(SegmentHeader.length)) { total, piece in
                switch piece {
                case .copy(_, let length): total + length
                case .bytes(let bytes): total + Int64(bytes.count)
                }
            }
            var change = RepairReport.Change(
                kind: .rewriteSegment, file: segment.path, bytesBefore: segment.length, bytesAfter: newLength,
                droppedRanges: dropped, recordsDropped: recordsDropped, recordsRestored: recordsRestored, reason: "")
            let isPrefix: Bool = switch pieces.count {
            case 0: true
            case 1: if case .copy(Int64(SegmentHeader.length), _) = pieces[0] { true } else { false }
            default: false
            }
            if headerProblem == nil && isPrefix {
                change.kind = .truncateSegment
                change.reason = segment.corrupt.last?.kind == .tornTail
                    ? "cut the torn tail of the active segment (a write a crash interrupted)"
                    : "cut the damaged end of the segment"
                repair.truncateTo = newLength
            } else {
                var reasons: [String] = []
                if let headerProblem { reasons.append("\(headerProblem); written anew with base seq \(header.baseSeq)") }
                let ranges = segment.corrupt.filter { $0.kind != .uncommittedBatch && $0.offset < segment.length }.count
                if ranges > 0 { reasons.append("\(ranges) damaged range\(ranges == 1 ? "" : "s") dropped, every intact record kept byte for byte") }
                if recordsDropped > 0 { reasons.append("\(recordsDropped) unreadable or never applied record\(recordsDropped == 1 ? "" : "s") dropped") }
                change.reason = reasons.joined(separator: "; ")
                repair.rewrite = (header, pieces)
            }
            plan.report.changes.append(change)
            plan.backupFiles.append(SegmentName.segment(segment.id))
        }
        plan.report.lostRecords += lost

        if segment.hasHint && (changesSegment || segment.hintProblem != nil) {
            let hintName = SegmentName.hint(segment.id)
            let hintPath = path(hintName)
            let before = (try? size(of: hintName)) ?? 0
            repair.hintChange = plan.report.changes.count
            plan.report.changes.append(.init(
                kind: .rebuildHint, file: hintPath, bytesBefore: before, bytesAfter: nil,
                reason: changesSegment ? "its segment changes" : "invalid: \(segment.hintProblem ?? "")"))
            plan.backupFiles.append(hintName)
        }
        if repair.rewrite != nil || repair.truncateTo != nil || repair.hintChange != nil { plan.segments.append(repair) }
    }

    /// The bytes of a record a hint entry describes completely — a delete or a batch commit — or nil.
    private static func rebuild(_ entry: HintedRecord) -> [UInt8]? {
        var value: [UInt8] = []
        switch entry.type {
        case .put:
            return nil
        case .delete:
            guard entry.valueLength == 0 else { return nil }
        case .batch:
            // A commit record's value is its batch's member count, which its key and seq give.
            let first = littleEndian(entry.key)
            guard entry.key.count == 8, first < entry.seq else { return nil }
            var count = entry.seq - first
            repeat {
                value.append(UInt8(count & 0x7F) | (count >= 0x80 ? 0x80 : 0))
                count >>= 7
            } while count > 0
            guard value.count == entry.valueLength else { return nil }
        }
        var buffer = ByteBuffer(capacity: Limits.maxRecordHeaderLength + entry.key.count + value.count)
        entry.key.withBytes { key in
            value.withBytes { value in
                _ = RecordEncoder().append(
                    type: entry.type, seq: entry.seq, key: key, value: value, expiresAt: nil,
                    batchMember: entry.flags & RecordFlags.batchMember != 0, to: &buffer)
            }
        }
        let bytes = buffer.copyBytes()
        guard Int64(bytes.count) == entry.length,
              case .success(let header) = bytes.withBytes({ RecordHeader.validate($0) }),
              header.type == entry.type, header.flags == entry.flags, header.seq == entry.seq else { return nil }
        return bytes
    }

    // MARK: Backing up

    private static func trimmingSlashes(_ path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        return trimmed
    }

    /// `<parent>/<store>.cask-backup-<UTC time>`, next to the store directory, numbered if taken.
    private func defaultBackupDirectory() -> String {
        var components: [Substring] = []
        let absolute = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        for component in absolute.split(separator: "/") {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        let name = components.popLast().map(String.init) ?? "store"
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
        let base = "/" + components.joined(separator: "/") + (components.isEmpty ? "" : "/") + "\(name).cask-backup-\(stamp)"
        var candidate = base
        var number = 2
        while fileSystem.isDirectory(candidate) != nil {
            candidate = "\(base)-\(number)"
            number += 1
        }
        return candidate
    }

    /// Copies `names` from the store directory into `backup` (created, or empty), durably.
    private func makeBackup(of names: [String], in backup: String, progress: ((CaskStore.RepairProgress) -> Void)?) throws(CaskError) {
        do throws(Errno) {
            switch fileSystem.isDirectory(backup) {
            case .some(true):
                guard try fileSystem.listDirectory(backup).isEmpty else { throw Errno.exists }
            case .some(false):
                throw Errno.notDirectory
            case .none:
                try fileSystem.makeDirectory(backup, mode: 0o700)
                try fileSystem.syncDirectory(CaskStore.parent(of: backup))
            }
        } catch {
            let why = error == .exists ? " (it must be new or empty)" : ""
            throw CaskError.io(operation: "create backup directory\(why)", path: backup, errno: error)
        }
        var meter = Meter(phase: .backingUp, total: 0, report: progress)
        for name in names { meter.total += (try? size(of: name)) ?? 0 }
        meter.report(0)
        for name in names {
            let target = backup + "/" + name
            do throws(Errno) {
                let source = try fileSystem.open(path(name), flags: O_RDONLY, mode: 0)
                defer { fileSystem.close(source) }
                let output = try fileSystem.open(target, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
                defer { fileSystem.close(output) }
                let length = try fileSystem.fileSize(source)
                try copy(from: source, at: 0, length: length, to: output, at: 0, meter: &meter)
                try fileSystem.fdatasync(output)
            } catch {
                throw CaskError.from(error, operation: "back up \(path(name)) to", path: target)
            }
        }
        meter.finish()
        do { try fileSystem.syncDirectory(backup) } catch {
            throw CaskError.from(error, operation: "sync backup directory", path: backup)
        }
    }

    /// Copies `length` bytes in chunks of 1 MiB; a source shorter than that is an I/O error.
    private func copy(from source: Int32, at offset: Int64, length: Int64, to output: Int32, at outputOffset: Int64, meter: inout Meter) throws(Errno) {
        var done: Int64 = 0
        while done < length {
            var chunk = [UInt8](repeating: 0, count: Int(min(1 << 20, length - done)))
            let read = try chunk.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(source, into: raw, at: offset + done) }
            guard read == chunk.count else { throw Errno.ioError }
            try chunk.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output, from: raw, at: outputOffset + done) }
            done += Int64(read)
            meter.advance(by: Int64(read))
        }
    }

    // MARK: Applying

    private func apply(_ plan: inout Plan, progress: ((CaskStore.RepairProgress) -> Void)?) throws(CaskError) {
        for (name, syncAfter) in plan.removals {
            do throws(Errno) {
                do { try fileSystem.unlink(path(name)) } catch where error == .noEntry {}
                if syncAfter { try fileSystem.syncDirectory(directory) }
            } catch {
                throw CaskError.from(error, operation: "remove", path: path(name))
            }
        }
        var meter = Meter(phase: .repairing, total: 0, report: progress)
        for repair in plan.segments {
            if let rewrite = repair.rewrite { meter.total += rewrite.pieces.reduce(Int64(SegmentHeader.length)) { $0 + $1.length } }
        }
        meter.report(0)
        for repair in plan.segments {
            let segmentPath = path(SegmentName.segment(repair.id))
            let hintPath = path(SegmentName.hint(repair.id))
            if repair.rewrite != nil || repair.truncateTo != nil, repair.hintChange != nil {
                // A hint must never describe the old layout of a segment that has a new one.
                do throws(Errno) {
                    try fileSystem.unlink(hintPath)
                    try fileSystem.syncDirectory(directory)
                } catch {
                    throw CaskError.from(error, operation: "remove", path: hintPath)
                }
            }
            if let length = repair.truncateTo {
                do throws(Errno) {
                    let fd = try fileSystem.open(segmentPath, flags: O_RDWR, mode: 0)
                    defer { fileSystem.close(fd) }
                    try fileSystem.ftruncate(fd, length: length)
                    try fileSystem.fdatasync(fd)
                } catch {
                    throw CaskError.from(error, operation: "truncate", path: segmentPath)
                }
            }
            if let rewrite = repair.rewrite {
                try self.rewrite(segmentPath, header: rewrite.header, pieces: rewrite.pieces, meter: &meter)
            }
            if let index = repair.hintChange {
                plan.report.changes[index].bytesAfter = try rebuildHint(repair.id)
            }
        }
        meter.finish()
    }

    /// Writes the repaired segment as `<segment>.tmp`, syncs it, renames it over the segment and
    /// syncs the directory: a crash leaves the old segment or the new one, never a mix.
    private func rewrite(_ segmentPath: String, header: SegmentHeader, pieces: [Piece], meter: inout Meter) throws(CaskError) {
        let temporary = segmentPath + ".tmp"
        do throws(Errno) {
            let source = try fileSystem.open(segmentPath, flags: O_RDONLY, mode: 0)
            defer { fileSystem.close(source) }
            let output = try fileSystem.open(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            var isOpen = true
            defer { if isOpen { fileSystem.close(output) } }
            do throws(Errno) {
                try header.encoded().withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output, from: raw, at: 0) }
                var position = Int64(SegmentHeader.length)
                meter.advance(by: position)
                for piece in pieces {
                    switch piece {
                    case .copy(let offset, let length):
                        try copy(from: source, at: offset, length: length, to: output, at: position, meter: &meter)
                    case .bytes(let bytes):
                        try bytes.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output, from: raw, at: position) }
                        meter.advance(by: Int64(bytes.count))
                    }
                    position += piece.length
                }
                try fileSystem.fdatasync(output)
                fileSystem.close(output)
                isOpen = false
                try fileSystem.rename(temporary, to: segmentPath)
                try fileSystem.syncDirectory(directory)
            } catch {
                try? fileSystem.unlink(temporary)
                throw error
            }
        } catch {
            throw CaskError.from(error, operation: "rewrite segment", path: segmentPath)
        }
    }

    /// Writes the hint file of a segment from a scan of it; returns the hint file's size.
    private func rebuildHint(_ id: UInt64) throws(CaskError) -> Int64 {
        let segmentPath = path(SegmentName.segment(id))
        let fd: Int32
        let length: Int64
        do throws(Errno) {
            fd = try fileSystem.open(segmentPath, flags: O_RDONLY, mode: 0)
            do { length = try fileSystem.fileSize(fd) } catch {
                fileSystem.close(fd)
                throw error
            }
        } catch {
            throw CaskError.from(error, operation: "open", path: segmentPath, reading: true)
        }
        // The file object owns the descriptor from here, and closes it.
        let file = SegmentFile(id: id, path: segmentPath, fd: fd, length: length, fileSystem: fileSystem)
        switch try HintWriter.write(for: file, length: length, directory: directory, fileSystem: fileSystem) {
        case .written:
            return try size(of: SegmentName.hint(id))
        case .skippedCorrupt, .skippedRetired:
            throw CaskError.corruptFile(path: segmentPath, reason: "still damaged after its repair; no hint file written")
        }
    }
}

/// Turns bytes done into `RepairProgress` reports: about one per MiB or 1%, and at the end.
private struct Meter {
    let phase: CaskStore.RepairProgress.Phase
    var total: Int64
    let report: ((CaskStore.RepairProgress) -> Void)?
    private(set) var done: Int64 = 0
    private var reported: Int64 = 0

    init(phase: CaskStore.RepairProgress.Phase, total: Int64, report: ((CaskStore.RepairProgress) -> Void)?) {
        self.phase = phase
        self.total = total
        self.report = report
    }

    func report(_ done: Int64) {
        report?(CaskStore.RepairProgress(phase: phase, done: done, total: total))
    }

    /// Reports where it stands, if it has not already.
    mutating func finish() {
        if reported != done { advance(to: done, force: true) }
    }

    mutating func advance(by count: Int64) {
        advance(to: done + count)
    }

    mutating func advance(to position: Int64, force: Bool = false) {
        done = position
        if force || done - reported >= max(1 << 20, total / 100) {
            reported = done
            report(done)
        }
    }
}
