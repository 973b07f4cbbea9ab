#if canImport(Glibc)
import Glibc
#endif

/// Rewrites sealed segments without their dead records, online: reads and writes go on meanwhile.
///
/// The steps, and why each is safe to interrupt at any instant (FORMAT.md, "Compaction"):
/// 1. **Copy.** Each input record still live is copied byte for byte (no recompression) into output
///    segments with fresh ids, written as `NNNNNNNNNN.cask.tmp`. Live means the index points at it.
///    A tombstone, or an expired put, is dropped only when no segment outside the inputs can hold an
///    older record of its key (every such segment's lowest seq is higher); otherwise it is copied, so
///    no deleted key can come back. A crash here leaves `.tmp` files, which the next open deletes.
/// 2. **Publish.** The inputs and everything written to the store so far are synced (the copy relied
///    on them), then each output is synced and renamed to its final name, the directory is synced,
///    and the outputs get hint files. A crash now leaves inputs and outputs side by side: the outputs
///    hold copies (same seq) of records the inputs still hold, so recovery finds the same contents.
/// 3. **Switch.** The index moves to the copies by compare-and-set: a key written since step 1
///    keeps its newer record, so a write racing the compaction always wins.
/// 4. **Retire.** A manifest listing the inputs is written atomically, the inputs are deleted (hints
///    first), then the manifest. A crash here is finished by the next open, which deletes the inputs
///    listed; the inputs are never left half deleted, which could bring back a key whose tombstone
///    was dropped. Readers still reading an input keep its descriptor and mapping until they are done.
struct Compactor {
    let state: ReadWriteLock<CaskStore.SharedState>
    let writer: Lock<StoreWriter>
    let fileSystem: any FileSystem
    let directory: String
    let options: CaskStore.Options

    /// Which sealed segments to compact.
    enum Selection {
        /// Every sealed segment with dead records (and empty ones).
        case everythingDead
        /// Segments whose dead share passes ``CaskStore/Options/compactionDeadRatio``, once the store's
        /// dead bytes pass ``CaskStore/Options/compactionMinDeadBytes``.
        case policy
    }

    private struct Move {
        var keyStart: Int
        var keyLength: Int
        var old: RecordLocation
        var new: RecordLocation
        var isPut: Bool
    }

    private final class Output {
        /// An output is written in whole chunks of this size from offset 0, the header's place left
        /// zero until ``Compactor/publish(_:)``. Each write then fills one aligned 2 MiB page-cache
        /// folio, which the kernel maps (the mapping is 2 MiB-aligned too) with one TLB entry, so a
        /// get whose record was compacted does not miss the TLB on it. Smaller or unaligned writes
        /// leave 4 KiB pages, and with them a page walk per random get (a C check: a dependent
        /// random read in 256 MiB, 149 → 136 ns).
        static let chunk = 2 << 20

        let id: UInt64
        let path: String
        let temporaryPath: String
        let fd: Int32
        var length = Int64(SegmentHeader.length)
        /// Bytes written to the file; the buffer holds what follows.
        var flushed: Int64 = 0
        var buffer = ByteBuffer(capacity: chunk + (64 << 10))
        var stats: SegmentStats

        init(id: UInt64, directory: String, fd: Int32, temporaryPath: String) {
            self.id = id
            path = directory + "/" + SegmentName.segment(id)
            self.temporaryPath = temporaryPath
            self.fd = fd
            stats = SegmentStats(id: id)
            stats.sealed = true
            buffer.appendWithUnsafeSpace(SegmentHeader.length) { space in
                space.initializeMemory(as: UInt8.self, repeating: 0)
                return space.count
            }
        }
    }

    // MARK: Selection

    /// The inputs, and the seq below which a dropped tombstone cannot shadow anything outside them.
    private func select(_ selection: Selection) -> (inputs: [SegmentFile], dropBelow: UInt64)? {
        // Under the writer mutex: no segment can be created (or sealed) while the choice is made, so
        // the active segment is never among the inputs.
        writer.withLock { w in select(selection, activeID: w.active.id, nextSeq: w.nextSeq) }
    }

    private func select(_ selection: Selection, activeID: UInt64, nextSeq: UInt64) -> (inputs: [SegmentFile], dropBelow: UInt64)? {
        state.read { shared in
            let sealed = shared.stats.segments.filter {
                $0.sealed && $0.id != activeID && !$0.damaged && shared.segments[UInt32($0.id)] != nil
            }
            let chosen: [SegmentStats]
            switch selection {
            case .everythingDead:
                chosen = sealed.filter { $0.deadBytes > 0 || $0.records == 0 }
            case .policy:
                let deadTotal = shared.stats.segments.reduce(0) { $0 + $1.deadBytes }
                guard deadTotal >= options.compactionMinDeadBytes else { return nil }
                chosen = sealed.filter { segment in
                    let body = max(1, segment.fileBytes - Int64(SegmentHeader.length))
                    return segment.records == 0 || Double(segment.deadBytes) / Double(body) >= options.compactionDeadRatio
                }
            }
            guard !chosen.isEmpty else { return nil }
            let inputIDs = Set(chosen.map(\.id))
            var dropBelow = nextSeq
            for segment in shared.stats.segments where !inputIDs.contains(segment.id) {
                if let minSeq = segment.minSeq { dropBelow = min(dropBelow, minSeq) }
            }
            return (chosen.compactMap { shared.segments[UInt32($0.id)] }, dropBelow)
        }
    }

    // MARK: Running

    /// Compacts the segments `selection` picks. An input found damaged on the way (damage the open
    /// did not see: it read a hint file, or the bytes went bad since) stops that attempt before
    /// anything is published; the segment is marked damaged, so that no compaction reads it again
    /// until a repair, and the others are compacted without it. The damage is in the result.
    func run(_ selection: Selection, progress: ((CaskStore.Progress) -> Void)? = nil) throws(CaskError) -> CaskStore.CompactionResult {
        let started = CaskStore.nowMilliseconds()
        var damage: [DamagedRange] = []
        while true {
            switch try attempt(selection, progress: progress) {
            case .done(var result):
                result.damage = damage
                result.milliseconds = CaskStore.nowMilliseconds() - started
                return result
            case .damaged(let input, let range):
                // Marked damaged, a segment is never selected again: this loop ends.
                guard !damage.contains(where: { $0.file == input.path }) else {
                    throw CaskError.corruptRecord(path: input.path, offset: range.offset, reason: range.reason)
                }
                damage.append(range)
                state.write { shared in shared.stats.update(input.id) { $0.damaged = true } }
            }
        }
    }

    private enum Attempt {
        case done(CaskStore.CompactionResult)
        /// Nothing was changed: `input` holds `range`.
        case damaged(SegmentFile, DamagedRange)
    }

    private func attempt(_ selection: Selection, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) -> Attempt {
        guard let (inputs, dropBelow) = select(selection) else { return .done(CaskStore.CompactionResult()) }
        var result = CaskStore.CompactionResult()
        result.segmentsCompacted = inputs.count
        result.bytesBefore = inputs.reduce(0) { $0 + $1.writtenLength.load(ordering: .relaxed) }

        var outputs: [Output] = []
        var moves: [Move] = []
        var keys: [UInt8] = []
        var expiredToForget: [Move] = []
        do throws(CaskError) {
            let now = CaskStore.nowMilliseconds()
            var meter = ProgressMeter(phase: .compacting, total: result.bytesBefore, report: progress)
            meter.report(0)
            for input in inputs {
                if let damage = try copyLive(
                    from: input, dropBelow: dropBelow, now: now, outputs: &outputs, moves: &moves, keys: &keys,
                    expired: &expiredToForget, result: &result) {
                    discard(outputs)
                    return .damaged(input, damage)
                }
                meter.advance(by: input.writtenLength.load(ordering: .relaxed))
            }
            meter.finish()
            try syncWhatTheCopyRelies(on: inputs)
            try publish(outputs)
        } catch {
            discard(outputs)
            throw error
        }
        let files = try openOutputs(outputs)
        for file in files where options.writeHints {
            // A missing hint only costs a scan at the next open.
            _ = try? HintWriter.write(for: file, length: file.writtenLength.load(ordering: .relaxed), directory: directory, fileSystem: fileSystem)
        }
        switchIndex(to: files, outputs: outputs, moves: moves, expired: expiredToForget, keys: keys)
        try retire(inputs)
        result.segmentsWritten = outputs.count
        result.bytesAfter = outputs.reduce(0) { $0 + $1.length }
        return .done(result)
    }

    /// Records of an input read but not yet judged live or dead (see ``copyLive``).
    private struct Staged {
        var header: RecordHeader
        var location: RecordLocation
        /// Where the record's bytes start in the staging buffer.
        var start: Int
    }

    /// Records staged before they are judged against the index.
    private static let stagedGroup = 256

    /// Step 1 for one input. Returns the first damaged range found in it, if any (the copy is then
    /// incomplete and must be discarded).
    ///
    /// Records are staged (copied) as they are read and judged in groups of ``stagedGroup``
    /// against the index. Judging a record a little after reading it is as good as at once: a
    /// record that is live then is copied, and a write since then wins by compare-and-set at the
    /// switch.
    ///
    /// The judging takes no lock, as a get does (``KeyIndex/pointsWithoutLock(_:at:)``): a put is
    /// live when its key's entry points at it, which a probe of the published table answers without
    /// reading stored keys; a tombstone when its key is absent, which such a probe answers when no
    /// entry on the path matches the key's hash bits — the others (an entry of another key, or of
    /// this one) are looked up exactly, under the shared lock, all of a group's at once. (Under a
    /// shared lock per group of 256, puts waited for it: 0.33–0.44× their rate during a compaction.)
    private func copyLive(
        from input: SegmentFile, dropBelow: UInt64, now: UInt64, outputs: inout [Output], moves: inout [Move],
        keys: inout [UInt8], expired: inout [Move], result: inout CaskStore.CompactionResult
    ) throws(CaskError) -> DamagedRange? {
        let length = input.writtenLength.load(ordering: .acquiring)
        var reader = SegmentReader(fd: input.fd, id: input.id, path: input.path, length: length, isActive: false, fileSystem: fileSystem)
        var staging = ByteBuffer(capacity: 64 << 10)
        var staged: [Staged] = []
        staged.reserveCapacity(Self.stagedGroup)
        var current: [RecordLocation?] = []
        current.reserveCapacity(Self.stagedGroup)

        func judgeStaged() throws(CaskError) {
            guard !staged.isEmpty else { return }
            staging.withUnsafeBytes { raw in
                var unsure: [Int] = []
                state.withoutLocking { shared in
                    for (position, record) in staged.enumerated() {
                        let keyStart = record.start + record.header.headerLength
                        let key = UnsafeRawBufferPointer(rebasing: raw[keyStart..<(keyStart + record.header.keyLength)])
                        // What `judge` compares: a put's own location when the index points at it,
                        // a tombstone's key's location (nil: absent).
                        current.append(ReaderRegistry.shared.read { () -> RecordLocation? in
                            switch record.header.type {
                            case .put: return shared.index.pointsWithoutLock(key, at: record.location) ? record.location : nil
                            case .delete:
                                if shared.index.probableLocationWithoutLock(key) != .absent { unsure.append(position) }
                                return nil
                            case .batch: return nil
                            }
                        })
                    }
                }
                guard !unsure.isEmpty else { return }
                state.read { shared in
                    for position in unsure {
                        let record = staged[position], keyStart = record.start + record.header.headerLength
                        current[position] = shared.index.lookup(UnsafeRawBufferPointer(rebasing: raw[keyStart..<(keyStart + record.header.keyLength)]))
                    }
                }
            }
            for (record, current) in zip(staged, current) {
                try judge(record, current: current, staging: staging, dropBelow: dropBelow, now: now,
                          outputs: &outputs, moves: &moves, keys: &keys, expired: &expired, result: &result)
            }
            staged.removeAll(keepingCapacity: true)
            current.removeAll(keepingCapacity: true)
            staging.count = 0
        }

        var failure: CaskError?
        var batch = BatchAssembler()
        let outcome = try reader.readRecords(
            from: Int64(SegmentHeader.length), batch: &batch,
            onRecord: { offset, header, bytes in
                guard failure == nil else { return }
                let location = RecordLocation(segmentID: UInt32(input.id), offset: UInt32(offset), length: UInt32(header.recordLength))
                staged.append(Staged(header: header, location: location, start: staging.count))
                staging.append(bytes)
                if staged.count == Self.stagedGroup {
                    do throws(CaskError) { try judgeStaged() } catch { failure = error }
                }
            })
        if let failure { throw failure }
        if let damage = outcome.damage.first {
            return damage
        }
        try judgeStaged()
        return nil
    }

    /// Copies one staged record if it is still needed, given `current`, where the index points for its key.
    private func judge(
        _ record: Staged, current: RecordLocation?, staging: borrowing ByteBuffer, dropBelow: UInt64, now: UInt64,
        outputs: inout [Output], moves: inout [Move], keys: inout [UInt8], expired: inout [Move], result: inout CaskStore.CompactionResult
    ) throws(CaskError) {
        let header = record.header, location = record.location
        let keep: Bool
        var forget = false
        switch header.type {
        case .put where (header.expiresAt ?? .max) > now:
            keep = current == location
        case .put:  // expired: hides older puts of its key, like a tombstone
            keep = current == location && header.seq >= dropBelow
            forget = current == location && !keep
        case .delete:
            keep = current == nil && header.seq >= dropBelow
        case .batch:
            keep = false  // a commit record: its members are copied as ordinary records
        }
        let keyStart = record.start + header.headerLength
        if forget {
            expired.append(Move(keyStart: keys.count, keyLength: header.keyLength, old: location, new: location, isPut: false))
            staging.withUnsafeBytes { keys.append(contentsOf: $0[keyStart..<(keyStart + header.keyLength)]) }
        }
        guard keep else {
            result.recordsDropped += 1
            return
        }
        let output = try destination(for: header.recordLength, outputs: &outputs)
        let newLocation = RecordLocation(segmentID: UInt32(output.id), offset: UInt32(output.length), length: UInt32(header.recordLength))
        let start = output.buffer.count
        staging.withUnsafeBytes { output.buffer.append(UnsafeRawBufferPointer(rebasing: $0[record.start..<(record.start + header.recordLength)])) }
        if header.flags & RecordFlags.batchMember != 0 {
            // A committed batch member goes on as an ordinary record (its commit record is not
            // copied): clear the flag and checksum the record again.
            output.buffer.withUnsafeMutableCapacity { space in
                RecordEncoder.clearBatchMemberFlag(UnsafeMutableRawBufferPointer(rebasing: space[start..<(start + header.recordLength)]))
            }
        }
        output.length += Int64(header.recordLength)
        output.stats.noteRecord(seq: header.seq, valueLength: header.valueLength)
        output.stats.fileBytes = output.length
        if output.buffer.count >= Output.chunk { try flush(output, wholeChunksOnly: true) }
        moves.append(Move(keyStart: keys.count, keyLength: header.keyLength, old: location, new: newLocation, isPut: header.type == .put))
        staging.withUnsafeBytes { keys.append(contentsOf: $0[keyStart..<(keyStart + header.keyLength)]) }
        result.recordsCopied += 1
    }

    /// The output a record of `length` bytes goes to: the current one, or a new one when it is full.
    private func destination(for length: Int, outputs: inout [Output]) throws(CaskError) -> Output {
        if let current = outputs.last, current.length == Int64(SegmentHeader.length) || current.length + Int64(length) <= options.maxSegmentSize {
            return current
        }
        if let full = outputs.last { try flush(full) }
        let id = writer.withLock { w in
            defer { w.nextSegmentID += 1 }
            return w.nextSegmentID
        }
        let temporaryPath = directory + "/" + SegmentName.segment(id) + ".tmp"
        let fd: Int32
        do throws(Errno) { fd = try fileSystem.open(temporaryPath, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o600) } catch {
            throw CaskError.from(error, operation: "create compaction output", path: temporaryPath)
        }
        let output = Output(id: id, directory: directory, fd: fd, temporaryPath: temporaryPath)
        outputs.append(output)
        return output
    }

    /// Writes the output's buffer to its file: all of it, or with `wholeChunksOnly` only whole
    /// ``Output/chunk``s (the rest stays buffered), so that every write but the last is one aligned chunk.
    private func flush(_ output: Output, wholeChunksOnly: Bool = false) throws(CaskError) {
        let count = wholeChunksOnly ? output.buffer.count / Output.chunk * Output.chunk : output.buffer.count
        guard count > 0 else { return }
        do throws(Errno) {
            try output.buffer.withUnsafeBytes { (raw) throws(Errno) in
                try fileSystem.writeAll(output.fd, from: UnsafeRawBufferPointer(rebasing: raw[0..<count]), at: output.flushed)
            }
        } catch {
            throw CaskError.from(error, operation: "write compaction output", path: output.temporaryPath)
        }
        output.flushed += Int64(count)
        output.buffer.removeFirst(count)
    }

    /// Between steps 1 and 2: makes durable what the outputs rely on. The inputs, which recovery may
    /// read beside the outputs; and every record the index pointed at during the copy, since it may
    /// shadow one the copy dropped. In `.os` and `.buffered` modes the inputs and the active segment
    /// may not be synced yet (and `.buffered` records may still be in the buffer); in `.fsync` mode a
    /// write is indexed before its `fdatasync`. Without this a power cut could leave the outputs
    /// beside inputs missing their tail, or drop a record for a newer one that is then lost: a
    /// deleted or overwritten value would come back.
    private func syncWhatTheCopyRelies(on inputs: [SegmentFile]) throws(CaskError) {
        let files = try writer.withLock { (w) throws(CaskError) -> [SegmentFile] in
            try w.checkUsable()
            try CaskStore.flushBuffer(&w, bufferLimit: options.bufferSize, state: state)
            // Oldest first (inputs not awaiting a sync were synced, or recovered, before the rest).
            let awaiting = Set(w.unsyncedSealed.map(\.id))
            return inputs.filter { !awaiting.contains($0.id) } + w.unsyncedSealed + [w.active]
        }
        for file in files {
            do throws(Errno) { try fileSystem.fdatasync(file.fd) } catch {
                // The kernel may have dropped the data and reports that only once: stop writing.
                let failure = CaskError.syncFailed(path: file.path, errno: error)
                writer.withLock { w in if w.failure == nil { w.failure = failure } }
                throw failure
            }
        }
    }

    /// Step 2: headers (the base seq is the lowest seq copied in), sync, rename, directory sync.
    private func publish(_ outputs: [Output]) throws(CaskError) {
        for output in outputs {
            try flush(output)
            let header = SegmentHeader(segmentID: output.id, baseSeq: output.stats.minSeq ?? 1).encoded()
            do throws(Errno) {
                try header.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.fd, from: raw, at: 0) }
                try fileSystem.fdatasync(output.fd)
            } catch {
                throw CaskError.from(error, operation: "sync compaction output", path: output.temporaryPath)
            }
        }
        for output in outputs {
            do throws(Errno) { try fileSystem.rename(output.temporaryPath, to: output.path) } catch {
                throw CaskError.from(error, operation: "rename compaction output", path: output.path)
            }
        }
        do throws(Errno) { try fileSystem.syncDirectory(directory) } catch {
            throw CaskError.from(error, operation: "sync directory", path: directory)
        }
    }

    /// Removes what a failed compaction wrote. Its outputs only ever hold copies, so removing them
    /// (renamed or not) loses nothing.
    private func discard(_ outputs: [Output]) {
        for output in outputs {
            fileSystem.close(output.fd)
            try? fileSystem.unlink(output.temporaryPath)
            try? fileSystem.unlink(output.path)
        }
    }

    private func openOutputs(_ outputs: [Output]) throws(CaskError) -> [SegmentFile] {
        outputs.map { output in
            SegmentFile(
                id: output.id, path: output.path, fd: output.fd, length: output.length, fileSystem: fileSystem,
                mapLength: options.memoryMappedReads ? Int(output.length) : 0)
        }
    }

    /// Moves switched per hold of the writer mutex: a big compaction must not stop every write for
    /// as long as it takes to switch them all. Small enough that a group's index lines (three per
    /// move) stay in a core's L2 between the warm-up and the switch.
    private static let switchGroup = 1024
    /// Moves ahead of the one being switched whose index lines are prefetched.
    private static let switchPrefetchDistance = 8

    /// Step 3: points the index at the copies, one ``switchGroup`` of moves at a time. Each move is
    /// a compare-and-set of its own, so readers and writers in between see each key at its old or
    /// its new copy (both valid until step 4).
    ///
    /// Readers never wait for the moves: a group holds the writer mutex (no write can change the
    /// index meanwhile) and only the shared lock, beside readers, since a move stores one word of
    /// an entry in one piece (``KeyIndex/switchLocation(_:from:to:)``). The segments' live counts
    /// follow under the exclusive lock, briefly, once per group. (Under the exclusive lock, the
    /// moves of a compaction of a 1M-key store held every reader up for 22–33 ms in all.)
    private func switchIndex(to files: [SegmentFile], outputs: [Output], moves: [Move], expired: [Move], keys: [UInt8]) {
        state.write { shared in
            // One publication of the extents (and one wait for readers) for all the outputs.
            shared.segments.add(files.map { (UInt32($0.id), $0) })
            for output in outputs { shared.stats.append(output.stats) }
        }
        keys.withUnsafeBytes { keyBytes in
            switchGroups(moves, keyBytes: keyBytes)
            guard !expired.isEmpty else { return }
            state.write { shared in
                for forget in expired {
                    let key = Self.key(of: forget, in: keyBytes)
                    if shared.index.remove(key, ifAt: forget.old) {
                        shared.stats.update(UInt64(forget.old.segmentID)) { $0.removeLive(bytes: forget.old.length) }
                        shared.expiries.set(key, expiresAt: nil)
                    }
                }
            }
        }
    }

    /// The moves of ``switchIndex(to:outputs:moves:expired:keys:)``, a group at a time.
    /// (Not inlined into its caller's closure: Swift 6.3.1's optimizer crashes on that closure
    /// in release builds, in `CopyPropagation`, when this loop is part of it.)
    @inline(never)
    private func switchGroups(_ moves: [Move], keyBytes: UnsafeRawBufferPointer) {
        for group in stride(from: 0, to: moves.count, by: Self.switchGroup) {
            let range = group..<min(group + Self.switchGroup, moves.count)
            // First load the group's index lines, outside the writer mutex, so that writes wait
            // for cache hits rather than a miss per move (about 150 ns each).
            state.read { shared in Self.prefetch(moves[range], keyBytes: keyBytes, in: shared.index) }
            writer.withLock { _ in
                let changes = state.read { shared in Self.switchMoves(moves[range], keyBytes: keyBytes, in: shared.index) }
                state.write { shared in changes.apply(to: &shared.stats) }
            }
        }
    }

    private static func key(of move: Move, in keyBytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: keyBytes[move.keyStart..<(move.keyStart + move.keyLength)])
    }

    private static func prefetch(_ moves: ArraySlice<Move>, keyBytes: UnsafeRawBufferPointer, in index: KeyIndex) {
        for move in moves where move.isPut { index.prefetch(key(of: move, in: keyBytes)) }
    }

    /// Switches the index entries of `moves` from their old locations to their copies, and returns
    /// what that does to the segments' live counts. Runs beside readers; the caller holds the
    /// writer mutex.
    private static func switchMoves(_ moves: ArraySlice<Move>, keyBytes: UnsafeRawBufferPointer, in index: KeyIndex) -> LiveChanges {
        var changes = LiveChanges()
        for position in moves.indices where moves[position].isPut {
            let move = moves[position]
            // The moves' keys land at random in the index: load a few ahead, so that their misses
            // overlap (writes wait meanwhile).
            let ahead = position + switchPrefetchDistance
            if ahead < moves.endIndex { index.prefetch(key(of: moves[ahead], in: keyBytes)) }
            // A write since the copy keeps its newer record; the copy is then dead.
            guard index.switchLocation(key(of: move, in: keyBytes), from: move.old, to: move.new) else { continue }
            changes.add(segment: move.old.segmentID, bytes: -Int64(move.old.length), records: -1)
            changes.add(segment: move.new.segmentID, bytes: Int64(move.new.length), records: 1)
        }
        return changes
    }

    /// Changes to the live bytes and records of a few segments, summed over a group of moves.
    private struct LiveChanges {
        private var changes: [(segment: UInt32, bytes: Int64, records: Int)] = []

        /// O(segments touched), a handful: a group's moves come from the inputs and go to the outputs.
        mutating func add(segment: UInt32, bytes: Int64, records: Int) {
            if let at = changes.firstIndex(where: { $0.segment == segment }) {
                changes[at].bytes += bytes
                changes[at].records += records
            } else {
                changes.append((segment, bytes, records))
            }
        }

        func apply(to stats: inout SegmentAccounting) {
            for change in changes {
                stats.update(UInt64(change.segment)) {
                    $0.liveBytes += change.bytes
                    $0.liveRecords += change.records
                }
            }
        }
    }

    /// Step 4.
    private func retire(_ inputs: [SegmentFile]) throws(CaskError) {
        let ids = inputs.map(\.id)
        let manifestPath = directory + "/" + CompactionManifest.fileName
        do throws(Errno) {
            try fileSystem.writeFileAtomically(manifestPath, directory: directory, bytes: CompactionManifest.encode(inputs: ids))
        } catch {
            throw CaskError.from(error, operation: "write compaction manifest", path: manifestPath)
        }
        state.write { shared in
            for id in ids { shared.segments[UInt32(id)] = nil }
            shared.stats.remove(Set(ids))
        }
        // From here no hint job can (re)create an input's hint file.
        for input in inputs { input.retired.withLock { $0 = true } }
        // Their data is in the synced outputs: nothing left to sync, and no reason to keep them open.
        let retiredIDs = Set(ids)
        writer.withLock { w in w.unsyncedSealed.removeAll { retiredIDs.contains($0.id) } }
        do throws(Errno) {
            for id in ids {
                for name in [SegmentName.hint(id), SegmentName.segment(id)] {
                    do { try fileSystem.unlink(directory + "/" + name) } catch where error == .noEntry {}
                }
            }
            try fileSystem.syncDirectory(directory)
            try fileSystem.unlink(manifestPath)
            try fileSystem.syncDirectory(directory)
        } catch {
            // The manifest stays; the next open finishes the job.
            throw CaskError.from(error, operation: "delete compacted segments", path: directory)
        }
    }
}
