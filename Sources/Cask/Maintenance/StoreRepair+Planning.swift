#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// What a repair will do: the store read into a plan (``StoreRepair/Plan``) and the report that says it.
extension StoreRepair {
    // MARK: Planning

    /// What to do, and the report that says it.
    struct Plan {
        var report: RepairReport
        /// Files to remove before the segments are repaired, in order, each followed by a directory
        /// sync where `syncAfter` says so (a compaction's inputs before its manifest).
        var removals: [(name: String, syncAfter: Bool)] = []
        var segments: [SegmentRepair] = []
        /// Every file that changes or goes, by name: what the backup holds.
        var backupFiles: [String] = []
        /// An encrypted store's `ENCRYPTION` file to write again (it is missing or damaged).
        var identityFile: [UInt8]?
    }

    enum Piece {
        /// Bytes of the old segment (whole records), copied as they are — in an encrypted store,
        /// each record opened and sealed again at its new place.
        case copy(offset: Int64, length: Int64)
        /// A record rebuilt from the hint file (in an encrypted store, its plain form, sealed when written).
        case bytes([UInt8])

        var length: Int64 {
            switch self {
            case .copy(_, let length): length
            case .bytes(let bytes): Int64(bytes.count)
            }
        }
    }

    struct SegmentRepair {
        var id: UInt64
        /// The new header and contents, or nil when only the hint file is rebuilt. An encrypted
        /// header gets a new salt when it is written.
        var rewrite: (header: SegmentHeader, pieces: [Piece])?
        /// An encrypted segment's salt as it is, whose cipher opens the records copied.
        var sourceSalt: [UInt8]?
        var truncateTo: Int64?
        /// The index of the hint file's change in the report, when it is rebuilt.
        var hintChange: Int?
    }

    func makePlan(lockHeld: Bool, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) -> Plan {
        let listing = try StoreDirectory(listing: directory, encryption: encryption, fileSystem: fileSystem)
        var plan = Plan(report: RepairReport(directory: directory))
        plan.report.ignoredFiles = listing.strays.map { "\(path($0.name)): \($0.reason)" }
        func change(_ kind: RepairReport.Change.Kind, _ name: String, _ reason: String) throws(CaskError) {
            plan.report.changes.append(.init(kind: kind, file: path(name), bytesBefore: try size(of: name), bytesAfter: 0, reason: reason))
            plan.backupFiles.append(name)
        }
        let ids = listing.segmentIDs
        // In a directory that holds no store (FORMAT.md, "The store directory"), no file is the
        // store's, whatever its name: nothing is removed.
        let holdsStore = listing.holdsStore

        // 1. An interrupted compaction.
        switch holdsStore ? listing.manifest : nil {
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
        for name in listing.leftovers where holdsStore {
            try change(.removeLeftover, name, "leftover temporary file of an interrupted write")
            plan.removals.append((name, false))
        }
        for id in listing.orphanHintIDs where holdsStore {
            try change(.removeFile, SegmentName.hint(id), "hint file without a segment \(SegmentName.segment(id))")
            plan.removals.append((SegmentName.hint(id), false))
        }
        if plan.removals.count > leftoversStart { plan.removals[plan.removals.count - 1].syncAfter = true }

        // 3. Segments and their hints.
        var meter = ProgressMeter(phase: .checking, total: 0, report: progress)
        for id in ids { meter.total += (try? size(of: SegmentName.segment(id))) ?? 0 }
        meter.report(0)
        var segments: [SegmentAnalysis] = []
        for id in ids {
            let analysis = try analyseSegment(id, of: listing, lockHeld: lockHeld, meter: &meter)
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

    func size(of name: String) throws(CaskError) -> Int64 {
        do { return try fileSystem.fileSize(atPath: path(name)) } catch {
            throw CaskError.from(error, operation: "stat", path: path(name), reading: true)
        }
    }

    func readAll(_ filePath: String, limit: Int64) throws(Errno) -> [UInt8]? {
        let file = try fileSystem.openFile(filePath, flags: O_RDONLY, mode: 0)
        let size = try fileSystem.fileSize(file.descriptor)
        guard size <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }
        return read == bytes.count ? bytes : nil
    }
}
