/// Rewrites sealed segments without their dead records, online: reads and writes go on meanwhile.
///
/// The steps, and why each is safe to interrupt at any instant (FORMAT.md, "Compaction"):
/// 1. **Copy.** Each input record still live is copied into output segments with fresh ids, written
///    as `NNNNNNNNNN.cask.tmp`: byte for byte, except a put that the store's current dictionary
///    compresses better, or whose dictionary is not the outputs' (``Recompression``), which is
///    compressed again with its seq, key and expiry unchanged. Live means the index points at it.
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
    /// The store's change streams, for the expiry notices of the keys a compaction forgets.
    let observers: ObserverRegistry
    /// The store's dictionaries: outputs name the current one, and their records are compressed
    /// against it.
    let dictionaries: DictionaryCatalog
    /// The store's encryption (nil: not encrypted): each output gets a salt of its own, and every
    /// record copied into it is sealed again at its place there.
    let encryption: StoreEncryption?

    /// Which sealed segments to compact.
    enum Selection {
        /// Every sealed segment with dead records (and empty ones), and every one whose dictionary
        /// is not the one the outputs would name (``Recompression``).
        case everythingDead
        /// Every sealed, undamaged segment: a small store merged into as few segments as its live
        /// records fill (``smallStoreIsDue(floor:)``).
        case wholeStore
        /// Segments whose dead share passes ``CaskStore/Options/compactionDeadRatio``, once the store's
        /// dead bytes pass ``CaskStore/Options/compactionMinDeadBytes``.
        case policy
        /// This one segment, if it is still sealed, undamaged and has dead records.
        case one(UInt64)
    }

    struct Move {
        var keyStart: Int
        var keyLength: Int
        var old: RecordLocation
        var new: RecordLocation
        var isPut: Bool
    }

    final class Output {
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
        var length: Int64
        /// Bytes written to the file; the buffer holds what follows.
        var flushed: Int64 = 0
        var buffer = ByteBuffer(capacity: chunk + (64 << 10))
        var stats: SegmentStats
        /// The dictionary the output's header names and its compressed records use; nil for none.
        let dictionary: CompressionDictionary?
        /// In an encrypted store: the output's new salt and cipher, which its records are sealed with.
        let sealing: SegmentSealing?
        /// The key prefix the output's header names (empty for none): its records elide it.
        let keyPrefix: [UInt8]

        init(
            id: UInt64, directory: String, fd: Int32, temporaryPath: String, dictionary: CompressionDictionary?, encryption: StoreEncryption?,
            keyPrefix: [UInt8]
        ) {
            self.id = id
            self.dictionary = dictionary
            self.keyPrefix = encryption == nil ? keyPrefix : []
            path = directory + "/" + SegmentName.segment(id)
            self.temporaryPath = temporaryPath
            self.fd = fd
            sealing = encryption.map { encryption in
                let (salt, cipher) = encryption.newCipher()
                return SegmentSealing(cipher: cipher, salt: salt)
            }
            length = Int64(SegmentHeader.byteCount(encrypted: sealing != nil, keyPrefixLength: self.keyPrefix.count))
            stats = SegmentStats(id: id)
            stats.dictionaryID = dictionary?.id
            stats.headerBytes = length
            stats.sealed = true
            buffer.appendWithUnsafeSpace(Int(length)) { space in
                space.initializeMemory(as: UInt8.self, repeating: 0)
                return space.count
            }
        }
    }

    /// Trains a dictionary from the values a compaction copied, if there were enough of them, and
    /// makes it the store's current one if it saves ``DictionaryTrainer/minimumGain`` more than
    /// `current` (or than none); the writer's next write then seals the active segment, and later
    /// compactions recompress into it. Costs about 0.3 s of this thread for 4 MiB of samples.
    private func train(from sampler: DictionarySampler, replacing current: CompressionDictionary?) {
        guard sampler.samples.count >= options.dictionaries.trainingSampleBytes / DictionaryOptions.compactionSampleShare,
              let trained = DictionaryTrainer.trainAndMeasure(samples: sampler.samples, sizes: sampler.sizes, against: current?.lz4),
              trained.isWorthUsing,
              let dictionary = try? dictionaries.add(content: trained.content, ratio: trained.ratio)
        else { return }
        writer.withLock { w in
            // Only the newest: a training that finished first must not replace a later one's.
            guard !w.closed, dictionaries.current?.id == dictionary.id else { return }
            w.adopt(dictionary, expectedRatio: trained.ratio, options: options.dictionaries)
        }
    }

    // MARK: Selection

    /// The dictionary outputs name: the store's current one, unless dictionaries are off.
    var outputDictionary: CompressionDictionary? { options.dictionaries.enabled ? dictionaries.current : nil }

    /// The key prefix outputs name: that of the largest input that names one, else the one the
    /// writer would give a new segment (the store's inputs may all predate prefixes); none when the
    /// writer gives none (``CaskStore/Options/keyPrefixes`` off, or an encrypted store). A record
    /// whose key elides other bytes than the output's prefix is written with a new header.
    private func outputKeyPrefix(for inputs: [SegmentFile]) -> [UInt8] {
        let (chooses, fallback) = writer.withLock { w in (w.choosesKeyPrefixes, w.keyPrefixForNewSegments) }
        guard chooses else { return [] }
        let named = inputs.filter { $0.keyPrefixRecord != nil }
        return named.max { $0.writtenLength.load(ordering: .relaxed) < $1.writtenLength.load(ordering: .relaxed) }?.keyPrefix ?? fallback
    }

    /// The inputs, and the seq below which a dropped tombstone cannot shadow anything outside them.
    private func select(_ selection: Selection) -> (inputs: [SegmentFile], dropBelow: UInt64)? {
        // Under the writer mutex: no segment can be created (or sealed) while the choice is made, so
        // the active segment is never among the inputs.
        // Counted before the mutex is taken (they are advice for the choice): O(keys with an expiry).
        let expired = state.read { Self.expiredBytes($0) }
        return writer.withLock { w in select(selection, activeID: w.active.id, nextSeq: w.nextSeq, expired: expired) }
    }

    private func select(
        _ selection: Selection, activeID: UInt64, nextSeq: UInt64, expired: [UInt64: Int64]
    ) -> (inputs: [SegmentFile], dropBelow: UInt64)? {
        state.read { shared in
            let sealed = shared.stats.segments.filter {
                $0.sealed && $0.id != activeID && !$0.damaged && shared.segments[UInt32($0.id)] != nil
            }.map { segment in
                var counted = segment
                counted.liveBytes -= expired[segment.id] ?? 0  // dead bytes are the rest of the file
                return counted
            }
            let chosen: [SegmentStats]
            switch selection {
            case .everythingDead:
                let wanted = outputDictionary?.id ?? 0
                chosen = sealed.filter {
                    $0.deadBytes > 0 || $0.records == 0 || shared.segments[UInt32($0.id)].map { $0.dictionary.id != wanted } == true
                }
            case .wholeStore:
                chosen = sealed
            case .one(let id):
                chosen = sealed.filter { $0.id == id && ($0.deadBytes > 0 || $0.records == 0) }
            case .policy:
                let deadTotal = shared.stats.segments.reduce(0) { $0 + $1.deadBytes } + expired.values.reduce(0, +)
                guard deadTotal >= options.compactionMinDeadBytes else { return nil }
                chosen = sealed.filter { segment in
                    let body = max(1, segment.fileBytes - segment.headerBytes)
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

    /// The bytes of the records of keys that have expired, by segment id. Still the keys' records
    /// in the index (and live in the segments' accounting), they are dead to a compaction, which
    /// drops them (keeping one only while an older record of its key may lie outside its inputs,
    /// as it keeps a tombstone): without counting them, a store of expiring entries (a search
    /// history, sessions) was never picked and grew without bound. O(keys with an expiry), under
    /// the index lock the caller holds (shared or not); none for a store that has none. Callers
    /// count them before taking the writer mutex, or for a store that fits in one segment.
    static func expiredBytes(_ shared: CaskStore.SharedState) -> [UInt64: Int64] {
        guard !shared.expiries.isEmpty else { return [:] }
        var bytes: [UInt64: Int64] = [:]
        shared.expiries.forEachExpired(now: CaskStore.nowMilliseconds()) { key in
            guard let location = key.withUnsafeBytes({ shared.index.lookup($0) }) else { return }
            bytes[UInt64(location.segmentID), default: 0] += Int64(location.length)
        }
        return bytes
    }

    /// Whether the store fits in one segment (its files hold at most ``CaskStore/Options/maxSegmentSize``)
    /// and more of its bytes are dead than live, at least `floor` of them — or it is spread over
    /// more than ``CompactionWatch/segmentsToMerge`` segments (an encrypted store starts a segment
    /// at each open that writes: an app's store, opened at every launch, would otherwise gather
    /// one file per launch) (``CompactionWatch``). Damaged segments are left out: compaction leaves
    /// them alone. O(segments).
    func smallStoreIsDue(floor: Int64) -> Bool {
        state.read { shared in
            var fileBytes: Int64 = 0, liveBytes: Int64 = 0, deadBytes: Int64 = 0, segments = 0
            for segment in shared.stats.segments where !segment.damaged {
                fileBytes += segment.fileBytes
                liveBytes += segment.liveBytes
                deadBytes += segment.deadBytes
                segments += 1
            }
            guard fileBytes <= options.maxSegmentSize else { return false }
            if segments > CompactionWatch.segmentsToMerge { return true }
            // Only now, for a store that fits in one segment: the records of expired keys are dead too.
            let expired = Self.expiredBytes(shared).values.reduce(0, +)
            return deadBytes + expired >= floor && deadBytes + expired > liveBytes - expired
        }
    }

    // MARK: Running

    /// Compacts the segments `selection` picks. An input found damaged on the way (damage the open
    /// did not see: it read a hint file, or the bytes went bad since) stops that attempt before
    /// anything is published; the segment is marked damaged, so that no compaction reads it again
    /// until a repair, and the others are compacted without it. The damage is in the result.
    ///
    /// On a disk too full for the copies of all the inputs at once, it goes one input at a time,
    /// deadest first: each needs room only for its own live records (and hint), and frees its
    /// file before the next. It throws ``CaskError/diskFull(path:)`` only when not one fits.
    func run(_ selection: Selection, progress: ((CaskStore.Progress) -> Void)? = nil) throws(CaskError) -> CaskStore.CompactionResult {
        do {
            return try runAttempts(selection, progress: progress)
        } catch .diskFull(let path) {
            // Ids only: a file object held here would keep its deleted file's space taken.
            let ids = select(selection)?.inputs.map(\.id) ?? []
            guard ids.count > 1 else { throw CaskError.diskFull(path: path) }
            let started = CaskStore.nowMilliseconds()
            let deadestFirst = state.read { shared in
                let expired = Self.expiredBytes(shared)
                let dead = { (id: UInt64) in (shared.stats[id]?.deadBytes ?? 0) + (expired[id] ?? 0) }
                return ids.sorted { dead($0) > dead($1) }
            }
            var total = CaskStore.CompactionResult()
            for id in deadestFirst {
                let result: CaskStore.CompactionResult
                do throws(CaskError) { result = try runAttempts(.one(id), progress: progress) } catch .diskFull { continue }
                total.segmentsCompacted += result.segmentsCompacted
                total.segmentsWritten += result.segmentsWritten
                total.bytesBefore += result.bytesBefore
                total.bytesAfter += result.bytesAfter
                total.recordsCopied += result.recordsCopied
                total.recordsDropped += result.recordsDropped
                total.damage += result.damage
            }
            guard total.segmentsCompacted > 0 || !total.damage.isEmpty else { throw CaskError.diskFull(path: path) }
            total.milliseconds = CaskStore.nowMilliseconds() - started
            return total
        }
    }

    private func runAttempts(_ selection: Selection, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) -> CaskStore.CompactionResult {
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
        let outputKeyPrefix = outputKeyPrefix(for: inputs)
        let recompression = Recompression(
            dictionary: outputDictionary, sampling: options.dictionaries.enabled ? options.dictionaries.trainingSampleBytes : nil)
        var moves: [Move] = []
        var keys: [UInt8] = []
        var expiredToForget: [Move] = []
        do throws(CaskError) {
            let now = CaskStore.nowMilliseconds()
            var meter = ProgressMeter(phase: .compacting, total: result.bytesBefore, report: progress)
            meter.report(0)
            for input in inputs {
                if let damage = try copyLive(
                    from: input, dropBelow: dropBelow, now: now, recompression: recompression, outputKeyPrefix: outputKeyPrefix, outputs: &outputs,
                    moves: &moves,
                    keys: &keys, expired: &expiredToForget, result: &result) {
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
            _ = try? HintWriter.write(
                for: file, length: file.writtenLength.load(ordering: .relaxed), directory: directory, encryption: encryption, fileSystem: fileSystem)
        }
        switchIndex(to: files, outputs: outputs, moves: moves, expired: expiredToForget, keys: keys)
        try retire(inputs)
        // A dictionary that only the inputs named is no longer needed (never the current one).
        let named = state.read { shared in shared.segments.dictionaryIDs }
        let wanted = writer.withLock { $0.dictionaryForNewSegments?.id }
        try? dictionaries.removeUnused(listed: dictionaries.loadedIDs, named: named, keeping: wanted)
        if let sampler = recompression.sampler { train(from: sampler, replacing: recompression.dictionary) }
        result.segmentsWritten = outputs.count
        result.bytesAfter = outputs.reduce(0) { $0 + $1.length }
        return .done(result)
    }
}
