#if canImport(Glibc)
import Glibc
#endif

/// Rebuilds the index from the files of a store directory when it is opened.
///
/// For each segment, in id order: validate the header, load its hint file if there is a valid one,
/// then scan whatever the hint does not cover. The newest record of each key wins by sequence
/// number (never by file order), and deletes shadow older puts seen in any order. A torn tail of
/// the last segment is cut (in a writable open); any other damage is skipped by resynchronising
/// and reported, never silently dropped.
package struct StoreRecovery {
    package struct Result {
        package var index: KeyIndex
        package var segments: [UInt64: SegmentFile] = [:]
        package var stats: [UInt64: SegmentStats] = [:]
        package var nextSeq: UInt64 = 1
        /// The segment to keep appending to, with its valid length, or nil to start a new one.
        package var active: SegmentFile?
        package var nextSegmentID: UInt64 = 1
        /// Clean sealed segments without a hint that covers them.
        package var segmentsNeedingHints: [UInt64] = []
        /// Expiry times of the keys whose winning record has one.
        package var expiries = ExpiryTable()
        /// Set when a hint turned out inconsistent after part of it was applied.
        var inconsistentHint: UInt64?
        package var report = RecoveryReport()
    }

    let directory: String
    let fileSystem: any FileSystem
    let writable: Bool
    let maxSegmentSize: Int64
    let mapReads: Bool
    /// Map the segment kept open for writing writable (``SegmentFile/write(_:at:)``).
    let mapWrites: Bool
    /// ...and in 2 MiB folios (``StoreWriter/hugePageReservationStep``).
    let hugePages: Bool

    package init(
        directory: String, fileSystem: any FileSystem, writable: Bool, maxSegmentSize: Int64, mapReads: Bool, mapWrites: Bool = false,
        hugePages: Bool = false
    ) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.writable = writable
        self.maxSegmentSize = maxSegmentSize
        self.mapReads = mapReads
        self.mapWrites = mapWrites
        self.hugePages = hugePages
    }

    package func run() throws(CaskError) -> Result {
        let names: [String]
        do { names = try fileSystem.listDirectory(directory) } catch {
            throw CaskError.from(error, operation: "list directory", path: directory, reading: true)
        }
        if writable {
            for name in names where name.hasSuffix(".tmp") { try? fileSystem.unlink(directory + "/" + name) }
        }
        var ids = names.compactMap(SegmentName.segmentID(fromFileName:)).sorted()
        if writable {
            // A hint whose segment is gone (older versions could leave one behind a compaction).
            let present = Set(ids)
            for name in names where name.hasSuffix(SegmentName.hintExtension) {
                let id = UInt64(name.dropLast(SegmentName.hintExtension.count))
                if let id, !present.contains(id) { try? fileSystem.unlink(directory + "/" + name) }
            }
        }
        var manifestProblem: RecoveryReport.CorruptRange?
        if names.contains(CompactionManifest.fileName) {
            let replaced = try finishCompaction(&manifestProblem)
            ids.removeAll { replaced.contains($0) }
        }
        let last = lastSegment(of: ids)
        var hinted = Set(ids.filter { names.contains(SegmentName.hint($0)) })
        var carriedTruncations: [RecoveryReport.Truncation] = []
        var distrustedHints: [String] = []
        attempt: while true {
            var result = Result(index: KeyIndex(minimumCapacity: 1024))
            result.report.truncations = carriedTruncations
            result.report.invalidHints = distrustedHints
            if let manifestProblem { result.report.corruptRanges.append(manifestProblem) }
            result.index.reserve(hintedEntries(ids.filter { hinted.contains($0) }))
            result.index.beginRecovery()
            for id in ids {
                guard id >= 1, id < UInt64(UInt32.max) else {
                    throw CaskError.corruptFile(path: path(SegmentName.segment(id)), reason: "segment id \(id) is outside 1...\(UInt32.max - 1)")
                }
                try recoverSegment(id: id, isLast: id == last, hasHint: hinted.contains(id), into: &result)
                if let distrusted = result.inconsistentHint {
                    // A hint passed its checksums but not its parse, after part of it was applied:
                    // start over without it (cuts already made stay made, and reported).
                    // It is damaged like any invalid hint (a block's raw length is not under its
                    // checksum): report it and, in a writable open, remove it.
                    hinted.remove(distrusted)
                    carriedTruncations = result.report.truncations
                    distrustedHints.append(path(SegmentName.hint(distrusted)))
                    if writable { try? fileSystem.unlink(path(SegmentName.hint(distrusted))) }
                    continue attempt
                }
            }
            return finish(result, ids: ids)
        }
    }

    /// The entries the hint files of `ids` declare in their headers (each header checked, each
    /// count capped at what its segment could hold), so that the index is sized once for all of
    /// them rather than grown, and rehashed, hint by hint. Unreadable hints count 0.
    private func hintedEntries(_ ids: [UInt64]) -> Int {
        var total = 0
        for id in ids {
            guard let fd = try? fileSystem.open(path(SegmentName.hint(id)), flags: O_RDONLY, mode: 0) else { continue }
            defer { fileSystem.close(fd) }
            var header = [UInt8](repeating: 0, count: HintFile.headerLength)
            guard let read = try? header.withMutableBytes({ (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }),
                  read == HintFile.headerLength,
                  let segment = try? fileSystem.open(path(SegmentName.segment(id)), flags: O_RDONLY, mode: 0)
            else { continue }
            defer { fileSystem.close(segment) }
            guard let segmentLength = try? fileSystem.fileSize(segment) else { continue }
            total += header.withUnsafeBytes { Self.declaredEntries($0, segmentLength: segmentLength) } ?? 0
        }
        return total
    }

    /// The entry count a hint file's header declares, if the header's checksum holds; capped at what
    /// a segment of `segmentLength` bytes could hold (9 bytes is the smallest record).
    private static func declaredEntries(_ hint: UnsafeRawBufferPointer, segmentLength: Int64) -> Int? {
        guard hint.count >= HintFile.headerLength,
              CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: hint[0..<44])) == hint.readLittleEndian(at: 44, as: UInt32.self)
        else { return nil }
        return Int(min(hint.readLittleEndian(at: 32, as: UInt64.self), UInt64(segmentLength / 9)))
    }

    /// The segment a writer appends to: the one with the highest base seq (compaction outputs have
    /// higher ids but hold older records, and a lower base seq). A newest segment whose header is not
    /// valid can only be one whose creation was torn, so it is the last one.
    private func lastSegment(of ids: [UInt64]) -> UInt64? {
        guard let newest = ids.last else { return nil }
        var best: (baseSeq: UInt64, id: UInt64)?
        for id in ids {
            let segmentPath = path(SegmentName.segment(id))
            guard let fd = try? fileSystem.open(segmentPath, flags: O_RDONLY, mode: 0) else { continue }
            defer { fileSystem.close(fd) }
            guard case .success(let header)? = try? SegmentHeader.read(fd: fd, path: segmentPath, fileSystem: fileSystem) else {
                if id == newest { return newest }
                continue
            }
            if best.map({ (header.baseSeq, id) > ($0.baseSeq, $0.id) }) ?? true { best = (header.baseSeq, id) }
        }
        return best?.id ?? newest
    }

    /// Applies a compaction manifest left by a crash: the segments it lists were replaced by segments
    /// already on disk. A writable open deletes them (hints first) and then the manifest; a read-only
    /// open leaves the files and just skips them. Returns the ids to skip. A manifest that is not
    /// valid is reported and ignored (nothing is deleted on its word).
    private func finishCompaction(_ problem: inout RecoveryReport.CorruptRange?) throws(CaskError) -> Set<UInt64> {
        let manifestPath = path(CompactionManifest.fileName)
        var bytes: [UInt8] = []
        do throws(Errno) {
            let fd = try fileSystem.open(manifestPath, flags: O_RDONLY, mode: 0)
            defer { fileSystem.close(fd) }
            let size = try fileSystem.fileSize(fd)
            guard size <= Int64(16 + CompactionManifest.maxInputs * 8 + 4) else { throw Errno.ioError }
            bytes = [UInt8](repeating: 0, count: Int(size))
            _ = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }
        } catch {
            problem = .init(file: manifestPath, offset: 0, length: Int64(bytes.count), reason: "unreadable compaction manifest (\(error))")
            return []
        }
        guard let inputs = bytes.withUnsafeBytes({ CompactionManifest.decode($0) }) else {
            problem = .init(file: manifestPath, offset: 0, length: Int64(bytes.count), reason: "invalid compaction manifest; ignored")
            return []
        }
        if writable {
            do throws(Errno) {
                for id in inputs {
                    for name in [SegmentName.hint(id), SegmentName.segment(id)] {
                        do { try fileSystem.unlink(path(name)) } catch where error == .noEntry {}
                    }
                }
                try fileSystem.syncDirectory(directory)
                try fileSystem.unlink(manifestPath)
                try fileSystem.syncDirectory(directory)
            } catch {
                throw CaskError.from(error, operation: "finish an interrupted compaction", path: manifestPath)
            }
        }
        return Set(inputs)
    }

    private func finish(_ recovered: Result, ids: [UInt64]) -> Result {
        var result = recovered
        result.index.endRecovery()
        result.report.segments = ids.count
        result.nextSegmentID = (ids.last ?? 0) + 1
        return result
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    private func recoverSegment(id: UInt64, isLast: Bool, hasHint: Bool, into result: inout Result) throws(CaskError) {
        let segmentPath = path(SegmentName.segment(id))
        let keepOpenForWriting = writable && isLast
        let fd: Int32
        do {
            fd = try fileSystem.open(segmentPath, flags: keepOpenForWriting ? O_RDWR : O_RDONLY, mode: 0)
        } catch {
            throw CaskError.from(error, operation: "open", path: segmentPath, reading: !keepOpenForWriting)
        }
        var length: Int64
        do { length = try fileSystem.fileSize(fd) } catch {
            fileSystem.close(fd)
            throw CaskError.from(error, operation: "fstat", path: segmentPath, reading: true)
        }
        // The last segment may go on growing: map it at its maximum size.
        let mapLength = !mapReads ? 0 : Int(keepOpenForWriting ? max(length, maxSegmentSize) : length)
        let file = SegmentFile(
            id: id, path: segmentPath, fd: fd, length: length, fileSystem: fileSystem, mapLength: mapLength,
            writable: keepOpenForWriting && mapWrites, hugePages: hugePages)
        var stats = SegmentStats(id: id)
        stats.sealed = !isLast

        // Header.
        var headerDamaged = false
        let decoded = try SegmentHeader.read(fd: fd, path: segmentPath, fileSystem: fileSystem)
        switch decoded {
        case .success(let header):
            result.nextSeq = max(result.nextSeq, header.baseSeq)
            if header.segmentID != id {
                result.report.corruptRanges.append(.init(
                    file: segmentPath, offset: 16, length: 8,
                    reason: "header names segment \(header.segmentID), file name says \(id)"))
            }
        case .failure(.unsupportedVersion(let version)):
            throw CaskError.unsupportedFormat(path: segmentPath, version: version)
        case .failure(.unsupportedHeaderLength(let headerLength)):
            throw CaskError.corruptFile(path: segmentPath, reason: SegmentHeader.Problem.unsupportedHeaderLength(headerLength).explanation)
        case .failure where keepOpenForWriting && length <= Int64(SegmentHeader.length):
            // A crash while the segment was being created: its header is cut short, or has the right
            // length but was not all written (zeros), and no record follows it. Rewrite the header.
            let header = SegmentHeader(segmentID: id, baseSeq: result.nextSeq).encoded()
            do {
                try fileSystem.ftruncate(fd, length: 0)
                try header.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(fd, from: raw, at: 0) }
                try fileSystem.fdatasync(fd)  // before any newer segment can exist, as for a new segment
            } catch {
                throw CaskError.from(error, operation: "rewrite segment header", path: segmentPath)
            }
            result.report.truncations.append(.init(
                file: segmentPath, offset: 0, bytesRemoved: length, reason: "segment header was incomplete; rewritten"))
            length = Int64(SegmentHeader.length)
            file.writtenLength.store(length, ordering: .relaxed)
        case .failure(let problem):
            headerDamaged = true
            result.report.corruptRanges.append(.init(
                file: segmentPath, offset: 0, length: min(length, Int64(SegmentHeader.length)),
                reason: "invalid segment header (\(problem.explanation))"))
        }
        stats.fileBytes = length

        // Hint.
        var batch = BatchAssembler()
        var scanFrom = Int64(SegmentHeader.length)
        var hintCovers: Int64 = 0
        if hasHint, case .success = decoded {
            if let covered = loadHint(id: id, segmentLength: length, into: &result, stats: &stats, batch: &batch) {
                if result.inconsistentHint != nil { return }
                scanFrom = covered
                hintCovers = covered
                result.report.segmentsFromHints += 1
            } else {
                result.report.invalidHints.append(path(SegmentName.hint(id)))
                // Remove it (it is rewritten later): a hint that covers more than a cut segment would
                // look valid again, and describe the wrong records, once new writes lengthen the segment.
                if writable { try? fileSystem.unlink(path(SegmentName.hint(id))) }
            }
        }

        // Scan the rest.
        var corrupt: [SegmentScanner.CorruptRange] = []
        var scanner = SegmentScanner(fd: fd, path: segmentPath, fileLength: length, fileSystem: fileSystem)
        let immediate = PendingIndexUpdates(index: result.index, depth: 0)
        let validEnd = try scanner.scan(
            from: min(scanFrom, length),
            onRecord: { offset, header, bytes in
                let key = UnsafeRawBufferPointer(rebasing: bytes[header.headerLength..<(header.headerLength + header.keyLength)])
                Self.receive(key: key, type: header.type, flags: header.flags, seq: header.seq, valueLength: header.valueLength,
                        expiresAt: header.expiresAt,
                        location: RecordLocation(segmentID: UInt32(id), offset: UInt32(offset), length: UInt32(header.recordLength)),
                        into: &result, stats: &stats, batch: &batch, pending: immediate)
            },
            onCorrupt: { corrupt.append($0) })
        /// From here on the segment ends at `newLength`; `cutting` truncates the file there too.
        func end(at newLength: Int64, cutting: Bool) throws(CaskError) {
            if cutting {
                do { try fileSystem.ftruncate(fd, length: newLength) } catch {
                    throw CaskError.from(error, operation: "ftruncate", path: segmentPath)
                }
            }
            length = newLength
            file.writtenLength.store(newLength, ordering: .relaxed)
            stats.fileBytes = newLength
        }
        // A read-only open beside a live writer: the file may have shrunk while it was scanned (the
        // writer gave back its reserved space). It ends where the scan found its end.
        if scanner.fileLength < length { try end(at: scanner.fileLength, cutting: false) }

        // Zero bytes from a record boundary to the end of the file are space the writer reserved
        // ahead of its writes (FORMAT.md, "Reserved space"), left by a crash or by a writer still
        // running: no records, and no damage. A writable open gives the last segment's back.
        if let tail = corrupt.last, tail.offset + tail.length == length,
           try SegmentScanner.isReservedSpace(fd: fd, path: segmentPath, from: tail.offset, to: length, fileSystem: fileSystem) {
            corrupt.removeLast()
            try end(at: tail.offset, cutting: keepOpenForWriting)
        }
        // A damaged tail of the last segment is a torn write: cut it.
        if keepOpenForWriting, let tail = corrupt.last, tail.offset + tail.length == length {
            corrupt.removeLast()
            try end(at: tail.offset, cutting: true)
            result.report.truncations.append(.init(file: segmentPath, offset: tail.offset, bytesRemoved: tail.length, reason: tail.reason))
        }
        // An atomic batch whose commit record never reached the disk is never applied. At the end of
        // the last segment (the writer died mid-batch) a writable open cuts it off, so that nothing
        // is ever appended behind it.
        if let start = batch.pending.map(\.location.offset).min() {
            let pendingBytes = batch.pending.reduce(Int64(0)) { $0 + Int64($1.location.length) }
            let reason = "\(batch.pending.count) records of a batch without its commit record"
            if keepOpenForWriting && corrupt.isEmpty && Int64(start) + pendingBytes == length {
                try end(at: Int64(start), cutting: true)
                result.report.truncations.append(.init(file: segmentPath, offset: Int64(start), bytesRemoved: pendingBytes, reason: reason))
                stats.records -= batch.pending.count
            } else {
                corrupt.append(.init(offset: Int64(start), length: pendingBytes, reason: reason))
            }
        }
        stats.damaged = headerDamaged || !corrupt.isEmpty
        for range in corrupt {
            result.report.corruptRanges.append(.init(file: segmentPath, offset: range.offset, length: range.length, reason: range.reason))
        }
        _ = validEnd

        // A damaged segment is never appended to: a new one starts, so the damage stays where it is.
        if keepOpenForWriting && length < maxSegmentSize && corrupt.isEmpty && !headerDamaged {
            result.active = file
        } else {
            stats.sealed = true
            if writable && corrupt.isEmpty && !headerDamaged && hintCovers < length { result.segmentsNeedingHints.append(id) }
        }
        result.segments[id] = file
        result.stats[id] = stats
    }

    /// Applies a hint file; returns the segment length it covers, or nil if it is unusable.
    private func loadHint(
        id: UInt64, segmentLength: Int64, into result: inout Result, stats: inout SegmentStats, batch: inout BatchAssembler
    ) -> Int64? {
        let hintPath = path(SegmentName.hint(id))
        guard let fd = try? fileSystem.open(hintPath, flags: O_RDONLY, mode: 0) else { return nil }
        defer { fileSystem.close(fd) }
        guard let size = try? fileSystem.fileSize(fd), size >= Int64(HintFile.headerLength),
              size <= 2 * segmentLength + Int64(HintFile.maxBlockLength) else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard let read = try? bytes.withMutableBytes({ (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: 0) }),
              read == Int(size) else { return nil }
        var loaded = stats
        var loadedBatch = batch
        let pending = PendingIndexUpdates(index: result.index)
        let outcome = bytes.withUnsafeBytes { raw in
            // Size the index for the entries at once rather than growing its way there. Usually the
            // pre-pass (`hintedEntries`) already did, for every hint; this covers one it could not read.
            if let entries = Self.declaredEntries(raw, segmentLength: segmentLength) {
                result.index.reserve(result.index.count + entries)
            }
            let outcome = HintFile.apply(raw, segmentID: id, segmentLength: segmentLength) { entry in
                Self.receive(key: entry.key, type: entry.type, flags: entry.flags, seq: entry.seq, valueLength: entry.valueLength,
                        expiresAt: entry.expiresAt,
                        location: RecordLocation(segmentID: UInt32(id), offset: UInt32(entry.offset), length: UInt32(entry.recordLength)),
                        into: &result, stats: &loaded, batch: &loadedBatch, pending: pending)
            }
            pending.drain { update in
                Self.apply(key: update.key, type: update.type, seq: update.seq, expiresAt: update.expiresAt, location: update.location,
                      into: &result, stats: &loaded)
            }
            return outcome
        }
        switch outcome {
        case .invalid:
            return nil
        case .inconsistent:
            result.inconsistentHint = id
            return 0
        case .applied(let summary):
            stats = loaded
            batch = loadedBatch
            return summary.coveredLength
        }
    }

    /// One valid record, from a scan or a hint: counted, then indexed through `pending` — at once
    /// (depth 0) or a few records later, in the same order — or for a batch member when its commit
    /// record comes. Static, as are `apply` and `removeLive`, so that its closures capture no copy
    /// of `self` (a retain of each of its references per record).
    private static func receive(
        key: UnsafeRawBufferPointer, type: RecordType, flags: UInt8, seq: UInt64, valueLength: Int, expiresAt: UInt64?,
        location: RecordLocation, into result: inout Result, stats: inout SegmentStats, batch: inout BatchAssembler,
        pending: PendingIndexUpdates
    ) {
        func index(_ key: UnsafeRawBufferPointer, _ type: RecordType, _ seq: UInt64, _ expiresAt: UInt64?, _ location: RecordLocation) {
            guard key.count <= PendingIndexUpdates.maxQueuedKeyLength else {
                pending.drain { update in
                    apply(key: update.key, type: update.type, seq: update.seq, expiresAt: update.expiresAt, location: update.location,
                          into: &result, stats: &stats)
                }
                return apply(key: key, type: type, seq: seq, expiresAt: expiresAt, location: location, into: &result, stats: &stats)
            }
            if let due = pending.add(key: key, type: type, seq: seq, expiresAt: expiresAt, location: location) {
                apply(key: due.key, type: due.type, seq: due.seq, expiresAt: due.expiresAt, location: due.location, into: &result, stats: &stats)
            }
        }
        result.report.recordsScanned += 1
        stats.noteRecord(seq: seq, valueLength: valueLength)
        if seq >= result.nextSeq { result.nextSeq = seq + 1 }
        if type == .batch {
            for member in batch.commit(firstSeq: BatchAssembler.firstSeq(ofCommitKey: key), commitSeq: seq) {
                member.key.withUnsafeBytes { memberKey in index(memberKey, member.type, member.seq, member.expiresAt, member.location) }
            }
        } else if flags & RecordFlags.batchMember != 0 {
            batch.hold(.init(key: Array(key), type: type, seq: seq, valueLength: valueLength, expiresAt: expiresAt, location: location))
        } else {
            index(key, type, seq, expiresAt, location)
        }
    }

    /// Indexes a record (that is not an uncommitted batch member).
    private static func apply(
        key: UnsafeRawBufferPointer, type: RecordType, seq: UInt64, expiresAt: UInt64?, location: RecordLocation,
        into result: inout Result, stats: inout SegmentStats
    ) {
        let isDelete = type == .delete
        switch result.index.recover(key, location, seq: seq, isDelete: isDelete) {
        case .inserted:
            if !isDelete { stats.liveBytes += Int64(location.length); stats.liveRecords += 1 }
            if expiresAt != nil || !result.expiries.isEmpty { result.expiries.set(key, expiresAt: isDelete ? nil : expiresAt) }
        case .replaced(let old, let wasDelete):
            if !wasDelete { removeLive(old, result: &result, stats: &stats) }
            if !isDelete { stats.liveBytes += Int64(location.length); stats.liveRecords += 1 }
            if expiresAt != nil || !result.expiries.isEmpty { result.expiries.set(key, expiresAt: isDelete ? nil : expiresAt) }
        case .superseded:
            break
        }
    }

    private static func removeLive(_ old: RecordLocation, result: inout Result, stats: inout SegmentStats) {
        if UInt64(old.segmentID) == stats.id {
            stats.liveBytes -= Int64(old.length)
            stats.liveRecords -= 1
        } else {
            result.stats[UInt64(old.segmentID)]?.liveBytes -= Int64(old.length)
            result.stats[UInt64(old.segmentID)]?.liveRecords -= 1
        }
    }
}
