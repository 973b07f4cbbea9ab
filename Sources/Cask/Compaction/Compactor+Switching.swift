/// Steps 3 and 4: switching the index to the copies, then retiring the inputs through the manifest.
extension Compactor {
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
    func switchIndex(to files: [SegmentFile], outputs: [Output], moves: [Move], expired: [Move], keys: [UInt8]) {
        state.write { shared in
            // One publication of the extents (and one wait for readers) for all the outputs.
            shared.segments.add(files.map { (UInt32($0.id), $0) })
            for output in outputs { shared.stats.append(output.stats) }
        }
        keys.withUnsafeBytes { keyBytes in
            switchGroups(moves, keyBytes: keyBytes)
            guard !expired.isEmpty else { return }
            forgetExpired(expired, keyBytes: keyBytes)
        }
    }

    /// Removes from the index the keys whose records expired and were dropped (unless written
    /// since). Their expiry notices go out first, if streams are open: forgotten, a key would
    /// never get one from the timer, which may not have run yet. Under the writer mutex, so that
    /// notices and writes go out in seq order.
    private func forgetExpired(_ expired: [Move], keyBytes: UnsafeRawBufferPointer) {
        writer.withLock { _ in
            let notices = state.write { shared -> [(key: [UInt8], seq: UInt64)] in
                let due = observers.isActive ? shared.expiries.takeNotices(dueBy: CaskStore.nowMilliseconds()) : []
                for forget in expired {
                    let key = Self.key(of: forget, in: keyBytes)
                    if shared.index.remove(key, ifAt: forget.old) {
                        shared.stats.update(UInt64(forget.old.segmentID)) { $0.removeLive(bytes: forget.old.length) }
                        shared.expiries.remove(key)
                    }
                }
                return due
            }
            for notice in notices { observers.publish(CaskStore.Change(kind: .expire, key: notice.key, seq: notice.seq)) }
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
            // Records compressed again change length: their entries change under the exclusive lock.
            let resized = moves[range].contains { $0.isPut && $0.old.length != $0.new.length }
            writer.withLock { _ in
                if resized {
                    state.write { shared in Self.switchMoves(moves[range], keyBytes: keyBytes, in: shared.index).apply(to: &shared.stats) }
                } else {
                    let changes = state.read { shared in Self.switchMoves(moves[range], keyBytes: keyBytes, in: shared.index) }
                    state.write { shared in changes.apply(to: &shared.stats) }
                }
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
    func retire(_ inputs: [SegmentFile]) throws(CaskError) {
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
