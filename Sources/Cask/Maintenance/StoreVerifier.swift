#if canImport(Glibc)
import Glibc
#endif

extension CaskStore {
    /// Checks every record of every segment in `directory` and every hint file against its segment.
    ///
    /// Opens nothing for writing, takes no lock and changes nothing, so it runs safely next to a
    /// process that has the store open for writing (whose active segment may then end in an append
    /// still in progress, reported as ``VerificationReport/Problem/Kind/tornTail``).
    /// Hint files are never trusted: each segment is scanned in full, each compressed payload is
    /// decompressed, and each hint file is compared with the scan entry by entry.
    ///
    /// Damage is reported, not thrown. Throws only when the store cannot be read at all: the
    /// directory is missing, a file cannot be opened or read, or a segment has a newer format
    /// (``CaskError/unsupportedFormat(path:version:)``).
    /// Complexity: O(bytes on disk); memory O(largest hint file).
    ///
    /// `progress`, if given, is called on the calling thread as the segments are read (about every
    /// 1% of the work, and after each segment), with the segment bytes read so far and the bytes of
    /// all segments as listed at the start (a segment a writer appends to meanwhile can take `done`
    /// past `total`).
    public static func verify(
        at directory: String, progress: ((_ done: Int64, _ total: Int64) -> Void)? = nil
    ) throws(CaskError) -> VerificationReport {
        try StoreVerifier(directory: directory, fileSystem: PosixFileSystem()).run(progress: progress)
    }
}

/// The work behind ``CaskStore/verify(at:progress:)``. Reads the store as an open does
/// (``StoreDirectory``, ``SegmentReader``, ``HintFile``); adds only the cross-checks: payloads
/// decompressed, and every hint compared with its segment.
package struct StoreVerifier {
    let directory: String
    let fileSystem: any FileSystem

    package init(directory: String, fileSystem: any FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
    }

    package func run(progress: ((_ done: Int64, _ total: Int64) -> Void)? = nil) throws(CaskError) -> VerificationReport {
        switch fileSystem.isDirectory(directory) {
        case .some(true): break
        case .some(false): throw CaskError.io(operation: "verify", path: directory, errno: .notDirectory)
        case .none: throw CaskError.io(operation: "verify", path: directory, errno: .noEntry)
        }
        let listing = try StoreDirectory(listing: directory, fileSystem: fileSystem)
        var report = VerificationReport(directory: directory)
        report.ignoredFiles = listing.strays.map { "\(path($0.name)): \($0.reason)" }
            + listing.retiredIDs.map { "\(listing.segmentPath($0)): replaced by a compaction the COMPACTION manifest records; the next writable open removes it" }
        if case .invalid(let reason)? = listing.manifest {
            let manifestPath = path(CompactionManifest.fileName)
            report.problems.append(.init(kind: .compactionManifest, file: manifestPath, offset: 0, length: (try? fileSystem.fileSize(atPath: manifestPath)) ?? 0, reason: reason))
        }
        let ids = listing.segmentIDs
        var meter = progress.map { ProgressMeter(total: segmentBytes(ids), progress: $0) }
        meter?.report(0)
        for id in ids {
            try verifySegment(id: id, of: listing, into: &report) { done in
                meter?.advance(within: done)
            }
            meter?.finishSegment()
        }
        for id in listing.orphanHintIDs {
            report.invalidHints.append(.init(file: path(SegmentName.hint(id)), reason: "there is no segment \(SegmentName.segment(id)) for it"))
        }
        return report
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    /// The sizes of these segments now (a segment that cannot be read counts 0: verifying it reports why).
    private func segmentBytes(_ ids: [UInt64]) -> Int64 {
        ids.reduce(0) { total, id in total + ((try? fileSystem.fileSize(atPath: path(SegmentName.segment(id)))) ?? 0) }
    }

    private func verifySegment(id: UInt64, of listing: StoreDirectory, into report: inout VerificationReport, progress: (Int64) -> Void) throws(CaskError) {
        let segmentPath = listing.segmentPath(id)
        var segment = VerificationReport.Segment(id: id, file: segmentPath, bytes: 0)
        var problems: [VerificationReport.Problem] = []
        // The hint, read in full before the records so that they can be checked against it as they come.
        var hint: HintCheck?
        var hintFailure: String?
        let read = try SegmentReader.read(
            segment: id, of: listing, fileSystem: fileSystem,
            onOpen: { length, _ in
                segment.bytes = length
                guard listing.hintedIDs.contains(id) else { return }
                switch loadHint(id: id, segmentLength: length) {
                case .success(let loaded): hint = loaded
                case .failure(let failure): hintFailure = failure.reason
                }
            },
            onRecord: { offset, header, bytes in
                segment.records += 1
                if let reason = Self.payloadProblem(header, bytes) {
                    problems.append(.init(kind: .record, file: segmentPath, offset: offset, length: Int64(header.recordLength), reason: reason))
                }
                hint?.check(offset: offset, header: header, record: bytes)
                progress(offset + Int64(header.recordLength))
            })
        guard let outcome = read else { return }  // Removed since the directory was listed (compaction).
        for damage in outcome.damage {
            problems.append(.init(kind: damage.kind.reported, file: segmentPath, offset: damage.offset, length: damage.length, reason: damage.reason))
        }

        if let hint {
            if let mismatch = hint.finish() {
                hintFailure = mismatch
            } else {
                segment.hint = .valid(entries: hint.entries.count, coveredBytes: hint.coveredLength)
            }
        }
        if let hintFailure {
            segment.hint = .invalid
            report.invalidHints.append(.init(file: path(SegmentName.hint(id)), reason: hintFailure))
        }
        problems.sort { $0.offset < $1.offset }
        report.problems += problems
        report.segments.append(segment)
        progress(segment.bytes)
    }

    /// Why a record that passed its checksum still cannot be read, or nil when it can.
    static func payloadProblem(_ header: RecordHeader, _ record: UnsafeRawBufferPointer) -> String? {
        guard header.isCompressed else { return nil }
        let start = header.headerLength + header.keyLength
        let payload = UnsafeRawBufferPointer(rebasing: record[start..<(start + header.storedLength)])
        let expands = withScratchBytes(header.valueLength) { LZ4Decompressor.decompress(payload, into: $0) }
        return expands ? nil : "LZ4 payload does not expand to \(header.valueLength) bytes"
    }

    private struct HintFailure: Error {
        var reason: String
    }

    private func loadHint(id: UInt64, segmentLength: Int64) -> Result<HintCheck, HintFailure> {
        let hintPath = path(SegmentName.hint(id))
        let fd: Int32
        do { fd = try fileSystem.open(hintPath, flags: O_RDONLY, mode: 0) } catch {
            return .failure(.init(reason: "cannot open: \(error)"))
        }
        defer { fileSystem.close(fd) }
        let size: Int64
        do { size = try fileSystem.fileSize(fd) } catch {
            return .failure(.init(reason: "cannot stat: \(error)"))
        }
        // The same bound recovery applies before reading a hint into memory.
        guard size >= Int64(HintFile.headerLength), size <= 2 * segmentLength + Int64(HintFile.maxBlockLength) else {
            let lost = SegmentReader.lostTail(segmentID: id, segmentLength: segmentLength, hintPath: hintPath, fileSystem: fileSystem)
            return .failure(.init(reason: lost.map { "it describes \($0.end) bytes of a segment of \(segmentLength)" }
                ?? "hint file is \(size) bytes, impossible for a segment of \(segmentLength) bytes"))
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        do {
            let read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }
            guard read == Int(size) else { return .failure(.init(reason: "file shrank while it was read")) }
        } catch {
            return .failure(.init(reason: "cannot read: \(error)"))
        }
        var check = HintCheck()
        let summary = bytes.withUnsafeBytes { raw in
            HintFile.forEachEntry(in: raw, segmentID: id, segmentLength: segmentLength) { check.add($0) }
        }
        guard let summary else {
            if let lost = bytes.withUnsafeBytes({ SegmentReader.lostTail(segmentID: id, segmentLength: segmentLength, hint: $0) }) {
                return .failure(.init(reason: "it describes \(lost.end) bytes of a segment of \(segmentLength)"))
            }
            return .failure(.init(reason: "hint file fails validation (header, block checksum or entry encoding), or describes more than the segment's \(segmentLength) bytes"))
        }
        check.coveredLength = summary.coveredLength
        return .success(check)
    }
}

/// Turns read positions into `progress(done, total)` calls: at most about one per 1% of `total`
/// (and per MiB), plus one at the end of each segment.
private struct ProgressMeter {
    let total: Int64
    let progress: (_ done: Int64, _ total: Int64) -> Void
    /// Bytes of the segments already read, and the position in the current one.
    private var finished: Int64 = 0
    private var position: Int64 = 0
    private var lastReported: Int64?

    init(total: Int64, progress: @escaping (_ done: Int64, _ total: Int64) -> Void) {
        self.total = total
        self.progress = progress
    }

    /// Reports `done` unless it was the last figure reported.
    mutating func report(_ done: Int64) {
        guard done != lastReported else { return }
        lastReported = done
        progress(done, total)
    }

    /// The scan of the current segment has reached `segmentPosition`.
    mutating func advance(within segmentPosition: Int64) {
        position = segmentPosition
        if finished + position - (lastReported ?? 0) >= max(1 << 20, total / 100) { report(finished + position) }
    }

    mutating func finishSegment() {
        finished += position
        position = 0
        report(finished)
    }
}

/// A hint file's entries, compared one by one with the records a segment scan finds.
private struct HintCheck {
    struct Entry {
        var offset: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var recordLength: Int
        var valueLength: Int
        var expiresAt: UInt64?
        var keyRange: Range<Int>
    }

    var entries: [Entry] = []
    /// Key bytes of all entries, back to back (entry keys are only valid during the hint callback).
    var keys: [UInt8] = []
    var coveredLength: Int64 = 0
    private var next = 0
    private var mismatch: String?

    mutating func add(_ entry: HintEntry) {
        let start = keys.count
        keys.append(contentsOf: entry.key)
        entries.append(Entry(
            offset: entry.offset, type: entry.type, flags: entry.flags, seq: entry.seq, recordLength: entry.recordLength,
            valueLength: entry.valueLength, expiresAt: entry.expiresAt, keyRange: start..<keys.count))
    }

    /// Checks the valid record the scan found at `offset` against the next hint entry.
    mutating func check(offset: Int64, header: RecordHeader, record: UnsafeRawBufferPointer) {
        guard mismatch == nil, offset < coveredLength else { return }
        guard next < entries.count, entries[next].offset <= offset else {
            mismatch = "the segment has a record at offset \(offset) that the hint does not list"
            return
        }
        let entry = entries[next]
        guard entry.offset == offset else {
            mismatch = "the hint lists a record at offset \(entry.offset) that the segment does not hold"
            return
        }
        next += 1
        let key = UnsafeRawBufferPointer(rebasing: record[header.headerLength..<(header.headerLength + header.keyLength)])
        var differences: [String] = []
        if entry.type != header.type { differences.append("type") }
        if entry.flags != header.flags { differences.append("flags") }
        if entry.seq != header.seq { differences.append("sequence number") }
        if entry.recordLength != header.recordLength { differences.append("record length") }
        if entry.valueLength != header.valueLength { differences.append("value length") }
        if entry.expiresAt != header.expiresAt { differences.append("expiry") }
        if !keys[entry.keyRange].elementsEqual(key) { differences.append("key") }
        if !differences.isEmpty {
            mismatch = "the entry for the record at offset \(offset) differs from it in: \(differences.joined(separator: ", "))"
        }
    }

    /// After the scan: the first disagreement between hint and segment, or nil when they agree.
    func finish() -> String? {
        if let mismatch { return mismatch }
        if next < entries.count {
            return "the hint lists a record at offset \(entries[next].offset) that the segment does not hold"
        }
        return nil
    }
}

extension SegmentReader.Damage.Kind {
    /// The kind as reports name it.
    var reported: VerificationReport.Problem.Kind {
        switch self {
        case .segmentHeader: .segmentHeader
        case .record: .record
        case .tornTail: .tornTail
        case .uncommittedBatch: .uncommittedBatch
        }
    }
}
