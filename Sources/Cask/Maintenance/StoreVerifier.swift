#if canImport(Glibc)
import Glibc
#endif

extension CaskStore {
    /// Checks every record of every segment in `directory` and every hint file against its segment.
    ///
    /// Opens nothing for writing, takes no lock and changes nothing, so it runs safely next to a
    /// process that has the store open for writing (whose active segment may then end in an append
    /// still in progress, reported as ``DamagedRange/Kind/tornTail``).
    /// Hint files are never trusted: each segment is scanned in full, each compressed payload is
    /// decompressed, and each hint file is compared with the scan entry by entry.
    ///
    /// Damage is reported, not thrown. Throws only when the store cannot be read at all: the
    /// directory is missing, a file cannot be opened or read, or a segment has a newer format
    /// (``CaskError/unsupportedFormat(path:version:)``).
    /// Complexity: O(bytes on disk); memory O(largest hint file).
    ///
    /// `progress`, if given, is called on the calling thread as the segments are read (phase
    /// ``Progress/Phase/verifying``; also after each segment), with the segment bytes read so far
    /// and the bytes of all segments as listed at the start (a segment a writer appends to
    /// meanwhile can take `done` past `total`).
    ///
    /// An encrypted store is verified with its key (`encryption`): every record's tag is checked
    /// too, and a record whose tag does not hold is damage. Throws ``CaskError/encryptionKeyRequired(path:)``
    /// without it and ``CaskError/wrongKey(path:)`` for another key.
    public static func verify(
        at directory: String, encryption: Encryption = .none, progress: ((Progress) -> Void)? = nil
    ) throws(CaskError) -> VerificationReport {
        try StoreVerifier(directory: directory, encryption: encryption, fileSystem: PosixFileSystem()).run(progress: progress)
    }
}

/// The work behind ``CaskStore/verify(at:progress:)``. Reads the store as an open does
/// (``StoreDirectory``, ``SegmentReader``, ``HintFile``); adds only the cross-checks: payloads
/// decompressed, and every hint compared with its segment.
package struct StoreVerifier {
    let directory: String
    let fileSystem: any FileSystem
    /// The encryption asked for, checked against the store's when the run starts.
    let requested: Encryption

    package init(directory: String, encryption: Encryption = .none, fileSystem: any FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
        requested = encryption
    }

    package func run(progress: ((CaskStore.Progress) -> Void)? = nil) throws(CaskError) -> VerificationReport {
        switch fileSystem.isDirectory(directory) {
        case .some(true): break
        case .some(false): throw CaskError.io(operation: "verify", path: directory, errno: .notDirectory)
        case .none: throw CaskError.directoryMissing(path: directory)
        }
        let encryption = try StoreEncryption.open(directory: directory, requested: requested, creating: false, fileSystem: fileSystem)
        let dictionaries = DictionaryCatalog(directory: directory, fileSystem: fileSystem, encryption: encryption)
        let listing = try StoreDirectory(listing: directory, encryption: encryption, fileSystem: fileSystem)
        var report = VerificationReport(directory: directory)
        report.ignoredFiles = listing.strays.map { "\(path($0.name)): \($0.reason)" }
            + listing.retiredIDs.map { "\(listing.segmentPath($0)): replaced by a compaction the COMPACTION manifest records; the next writable open removes it" }
        if case .invalid(let reason)? = listing.manifest {
            let manifestPath = path(CompactionManifest.fileName)
            report.damagedRanges.append(DamagedRange(
                kind: .compactionManifest, file: manifestPath, segmentID: nil, offset: 0,
                length: (try? fileSystem.fileSize(atPath: manifestPath)) ?? 0, reason: reason))
        }
        let ids = listing.segmentIDs
        var meter = ProgressMeter(phase: .verifying, total: progress == nil ? 0 : segmentBytes(ids), report: progress)
        meter.report(0)
        var finished: Int64 = 0  // Bytes of the segments already read.
        for id in ids {
            try verifySegment(id: id, of: listing, encryption: encryption, dictionaries: dictionaries, into: &report) { position in
                meter.advance(to: finished + position)
            }
            finished += report.segments.last.map { $0.id == id ? $0.bytes : 0 } ?? 0
            meter.advance(to: finished)
            meter.finish()
        }
        for id in listing.orphanHintIDs {
            report.invalidHints.append(InvalidHint(file: path(SegmentName.hint(id)), segmentID: id, reason: "there is no segment \(SegmentName.segment(id)) for it"))
        }
        return report
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    /// The sizes of these segments now (a segment that cannot be read counts 0: verifying it reports why).
    private func segmentBytes(_ ids: [UInt64]) -> Int64 {
        ids.reduce(0) { total, id in total + ((try? fileSystem.fileSize(atPath: path(SegmentName.segment(id)))) ?? 0) }
    }

    private func verifySegment(
        id: UInt64, of listing: StoreDirectory, encryption: StoreEncryption?, dictionaries: DictionaryCatalog, into report: inout VerificationReport,
        progress: (Int64) -> Void
    ) throws(CaskError) {
        let segmentPath = listing.segmentPath(id), hintPath = listing.hintPath(id)
        var segment = VerificationReport.Segment(id: id, file: segmentPath, bytes: 0)
        var damage: [DamagedRange] = []
        // The hint, read in full before the records so that they can be checked against it as they come.
        var hint: HintCheck?
        var invalidHint: InvalidHint?
        var dictionary = SegmentDictionary.none
        var keyPrefix: [UInt8] = []
        let read = try SegmentReader.read(
            segment: id, of: listing, encryption: encryption, fileSystem: fileSystem,
            onOpen: { length, header, recordKeyPrefix in
                segment.bytes = length
                keyPrefix = recordKeyPrefix
                dictionary = header.map { dictionaries.dictionary(of: $0) } ?? .none
                guard listing.hintedIDs.contains(id) else { return }
                let sealing = encryption.flatMap { encryption in
                    header?.sealing.map { HintFile.Sealing(encryption: encryption, segmentSalt: $0.salt) }
                }
                if encryption != nil && sealing == nil {
                    invalidHint = InvalidHint(file: hintPath, segmentID: id, reason: "its segment's header does not authenticate, so the hint cannot be checked")
                    return
                }
                switch SegmentReader.readHint(of: id, segmentLength: length, at: hintPath, sealing: sealing, fileSystem: fileSystem) {
                case .read(let bytes):
                    hint = bytes.withUnsafeBytes {
                        HintCheck(hint: $0, segmentID: id, segmentLength: length, sealing: sealing, keyPrefix: header?.keyPrefix)
                    }
                    if hint == nil {
                        let reason = bytes.withUnsafeBytes { SegmentReader.refusal(of: $0, segmentID: id, segmentLength: length, sealing: sealing) }
                        invalidHint = InvalidHint(file: hintPath, segmentID: id, reason: reason)
                    }
                case .unusable(let failure):
                    invalidHint = failure
                }
            },
            onRecord: { offset, header, bytes in
                segment.records += 1
                if let reason = Self.payloadProblem(header, bytes, dictionary: dictionary) {
                    damage.append(DamagedRange(
                        kind: .record, file: segmentPath, segmentID: id, offset: offset, length: Int64(header.recordLength), reason: reason))
                }
                keyPrefix.withUnsafeBytes { hint?.check(offset: offset, header: header, record: bytes, keyPrefix: $0) }
                progress(offset + Int64(header.recordLength))
            })
        guard let outcome = read else { return }  // Removed since the directory was listed (compaction).
        damage += outcome.damage

        if let hint {
            let verdict = hint.finish(damage: outcome.damage, segmentLength: segment.bytes)
            if let problem = verdict.problem {
                invalidHint = InvalidHint(file: hintPath, segmentID: id, reason: problem)
            } else {
                segment.hint = .valid(entries: verdict.entries, coveredBytes: verdict.coveredLength)
            }
        }
        if let invalidHint {
            segment.hint = .invalid
            report.invalidHints.append(invalidHint)
        }
        damage.sort { $0.offset < $1.offset }
        report.damagedRanges += damage
        report.segments.append(segment)
        progress(segment.bytes)
    }

    /// Why a record that passed its checksum still cannot be read, or nil when it can.
    static func payloadProblem(_ header: RecordHeader, _ record: UnsafeRawBufferPointer, dictionary: SegmentDictionary) -> String? {
        guard header.isCompressed else { return nil }
        let payload = UnsafeRawBufferPointer(rebasing: record[header.payloadRange])
        return withScratchBytes(header.valueLength) { CaskStore.payloadProblem(header, payload: payload, dictionary: dictionary, into: $0) }
    }
}
