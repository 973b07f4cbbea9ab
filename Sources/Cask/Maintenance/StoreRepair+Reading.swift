#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Reading one segment and its hint for a repair, through the one reader (``SegmentReader``).
extension StoreRepair {
    // MARK: Reading a segment

    /// A valid record as the scan found it (its bytes stay on disk).
    struct ScannedRecord {
        var offset: Int64
        var length: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var valueLength: Int
        var expiresAt: UInt64?
        var key: [UInt8]
        /// For a batch commit record: the first seq of its batch, and the member count its value
        /// states (0 if the value does not parse, as the reader takes it).
        var batchFirstSeq: UInt64
        var batchCount: UInt64 = 0
        /// Why the record cannot be read although its checksum holds (a value that does not decompress).
        var payloadProblem: String?
    }

    /// A hint file entry for a record inside a damaged range.
    struct HintedRecord {
        var offset: Int64
        var length: Int64
        var type: RecordType
        var flags: UInt8
        var seq: UInt64
        var valueLength: Int
        var key: [UInt8]
    }

    struct SegmentAnalysis {
        var id: UInt64
        var path: String
        var length: Int64
        var header: Result<SegmentHeader, SegmentHeader.Problem>
        var records: [ScannedRecord] = []
        var corrupt: [DamagedRange] = []
        var hasHint: Bool
        /// The key prefix the segment's records were read with: its header's, or behind a damaged
        /// header the one its hint file holds (which a header written anew keeps).
        var keyPrefix: [UInt8] = []
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

    func analyseSegment(
        _ id: UInt64, of listing: StoreDirectory, lockHeld: Bool, meter: inout ProgressMeter
    ) throws(CaskError) -> SegmentAnalysis {
        let segmentPath = listing.segmentPath(id)
        var analysis = SegmentAnalysis(id: id, path: segmentPath, length: 0, header: .failure(.tooShort), hasHint: listing.hintedIDs.contains(id))
        var records: [ScannedRecord] = []
        var dictionary = SegmentDictionary.none
        let start = meter.done
        var hintSealing: HintFile.Sealing?
        var keyPrefix: [UInt8] = []
        let read = try SegmentReader.read(
            segment: id, of: listing, lockHeld: lockHeld, encryption: encryption, fileSystem: fileSystem,
            onOpen: { length, header, recordKeyPrefix in
                analysis.length = length
                if let header { analysis.header = .success(header) }
                keyPrefix = recordKeyPrefix
                analysis.keyPrefix = recordKeyPrefix
                dictionary = header.map { dictionaries.dictionary(of: $0) } ?? .none
                if let encryption, let salt = header?.sealing?.salt { hintSealing = HintFile.Sealing(encryption: encryption, segmentSalt: salt) }
            },
            onRecord: { offset, header, bytes in
                let key = keyPrefix.withUnsafeBytes { header.key(in: bytes, prefix: $0) }
                records.append(ScannedRecord(
                    offset: offset, length: Int64(header.recordLength), type: header.type, flags: header.flags, seq: header.seq,
                    valueLength: header.valueLength, expiresAt: header.expiresAt, key: key,
                    batchFirstSeq: header.type == .batch ? Self.littleEndian(key) : 0,
                    batchCount: header.type == .batch ? SegmentReader.memberCount(ofCommit: header, bytes) ?? 0 : 0,
                    payloadProblem: StoreVerifier.payloadProblem(header, bytes, dictionary: dictionary)))
                meter.advance(to: start + offset + Int64(header.recordLength))
            })
        guard let outcome = read else {
            throw CaskError.io(operation: "open", path: segmentPath, errno: .noEntry)
        }
        meter.report(start + analysis.length)
        if case .failure = analysis.header, let damage = outcome.damage.first, damage.kind != .tornTail {
            analysis.header = .failure(.badChecksum)
            analysis.headerReason = damage.reason
        }
        analysis.records = records
        // Damage other than the header's: the header is judged by itself below.
        analysis.corrupt = outcome.damage.filter { $0.kind != .segmentHeader }
        if case .success(let header) = analysis.header { analysis.nextSeq = header.baseSeq }
        for record in records { analysis.nextSeq = max(analysis.nextSeq, record.seq + 1) }

        if analysis.hasHint {
            if encryption != nil && hintSealing == nil {
                analysis.hintProblem = "its segment's header does not authenticate, so the hint cannot be checked"
            } else {
                checkHint(&analysis, sealing: hintSealing)
            }
        }
        for entry in analysis.hinted { analysis.nextSeq = max(analysis.nextSeq, entry.seq + 1) }
        // What a damaged range held, when no trusted hint says: not for a torn tail (a write a crash
        // interrupted before it was acknowledged), nor for a batch never applied.
        let file: OpenFile
        do { file = try fileSystem.openFile(segmentPath, flags: O_RDONLY, mode: 0) } catch {
            throw CaskError.from(error, operation: "open", path: segmentPath, reading: true)
        }
        for range in analysis.corrupt where range.kind == .record && !analysis.hinted.contains(where: { range.contains($0.offset) }) {
            if range.offset >= analysis.length { continue }  // A lost tail: the hint names what it held.
            if let suspect = try suspectedRecord(in: range, fd: file.descriptor, path: segmentPath, keyPrefix: keyPrefix) {
                analysis.suspected.append(suspect)
            }
        }
        return analysis
    }

    /// A u64 from up to 8 little-endian bytes.
    static func littleEndian(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
    }

    /// Compares the segment's hint file with the scan (``HintCheck``). A hint that lists every
    /// intact record exactly (and nothing else outside the damaged ranges) is trusted for the
    /// records it lists inside them, and for those it lists past the segment's end (lost with its tail).
    func checkHint(_ analysis: inout SegmentAnalysis, sealing: HintFile.Sealing?) {
        let hintPath = path(SegmentName.hint(analysis.id))
        let bytes: [UInt8]
        switch SegmentReader.readHint(of: analysis.id, segmentLength: analysis.length, at: hintPath, sealing: sealing, fileSystem: fileSystem) {
        case .read(let read): bytes = read
        case .unusable(let invalid):
            analysis.hintProblem = invalid.reason
            return
        }
        let keyPrefix = (try? analysis.header.get())?.keyPrefix
        guard var check = bytes.withUnsafeBytes({
            HintCheck(hint: $0, segmentID: analysis.id, segmentLength: analysis.length, sealing: sealing, keyPrefix: keyPrefix)
        }) else {
            analysis.hintProblem = bytes.withUnsafeBytes {
                SegmentReader.refusal(of: $0, segmentID: analysis.id, segmentLength: analysis.length, sealing: sealing)
            }
            return
        }
        for record in analysis.records {
            check.check(
                offset: record.offset, type: record.type, flags: record.flags, seq: record.seq, recordLength: Int(record.length),
                valueLength: record.valueLength, expiresAt: record.expiresAt, key: record.key)
        }
        let verdict = check.finish(damage: analysis.corrupt, segmentLength: analysis.length)
        analysis.hintProblem = verdict.problem
        guard verdict.mismatch == nil else { return }
        analysis.hinted = verdict.inDamage.map { entry in
            HintedRecord(
                offset: entry.offset, length: Int64(entry.recordLength), type: entry.type, flags: entry.flags,
                seq: entry.seq, valueLength: entry.valueLength, key: Array(check.key(of: entry)))
        }
        // The segment lost its end: name every record the hint says was there.
        analysis.suspected += verdict.pastEnd.map { entry in
            RepairReport.LostRecord(
                file: analysis.path, offset: entry.offset, type: entry.type, seq: entry.seq, key: Array(check.key(of: entry)), verified: true)
        }
    }

    /// The record a damaged range seems to start with, when its header still parses (unverified:
    /// any field may be damaged). In an encrypted store, nil: its key is sealed, and cannot be
    /// read from bytes that do not authenticate.
    /// `keyPrefix`: the key prefix the segment's header names, which the record's key may elide.
    func suspectedRecord(
        in range: DamagedRange, fd: Int32, path segmentPath: String, keyPrefix: [UInt8]
    ) throws(CaskError) -> RepairReport.LostRecord? {
        if encryption != nil { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(min(range.length, Int64(Limits.maxRecordHeaderLength + Limits.maxKeyLength))))
        let read: Int
        do { read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: range.offset) } } catch {
            throw CaskError.io(operation: "pread", path: segmentPath, errno: error)
        }
        guard case .success(let header) = bytes.withBytes({ RecordHeader.parse($0, keyPrefixLength: keyPrefix.count) }),
              header.type != .batch, header.storedKeyRange.upperBound <= read else { return nil }
        return RepairReport.LostRecord(
            file: segmentPath, offset: range.offset, type: header.type, seq: header.seq,
            key: bytes.withBytes { record in keyPrefix.withBytes { header.key(in: record, prefix: $0) } }, verified: false)
    }
}
