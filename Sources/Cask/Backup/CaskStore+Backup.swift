extension CaskStore {
    /// Makes a consistent copy of the store in `destination`, a directory that must not exist yet,
    /// while readers and writers go on: an ordinary store, which opens clean, holding every commit
    /// up to one seq and none after it (never part of a batch).
    ///
    /// The point is the moment the call begins: on a writable store, the writes that returned
    /// before it (and perhaps some made meanwhile, whole); on a read-only one, its view (call
    /// ``refresh()`` first for the writer's newest commits).
    ///
    /// How: sealed segments never change, so they (and their hint files) get a second name in the
    /// copy, or are copied (`copy_file_range`) when `destination` is on another file system or
    /// `method` is ``BackupMethod/copy``; the active segment is copied up to its last commit. The
    /// files are built in `<destination>.incomplete-<pid>-<n>`, each synced, the directory synced,
    /// then renamed to `destination` (never over anything there) and its parent synced: a backup
    /// that is killed or fails leaves no `destination`, only that directory (removed on failure,
    /// left behind by a kill: delete it), and changes nothing in the store.
    ///
    /// A linked segment is one file with two names: a backup made by links shares the store's
    /// disk and protects against losing data to a mistake (a bad delete, an overwrite), not against
    /// losing the disk: copy it elsewhere (its files never change) or use ``BackupMethod/copy``.
    ///
    /// Concurrency: writes wait only while the write buffer is flushed (O(buffer)); a compaction
    /// waits for the whole backup (and ``close()`` with it). O(files) when linking, O(bytes) when
    /// copying. `verify`: then reads the copy back (``verify(at:progress:)``) and opens it read-only
    /// (see ``BackupReport/verificationProblems``). `progress`: phase
    /// ``Progress/Phase/backingUp``, bytes placed of the store's bytes.
    ///
    /// Throws ``CaskError/closed(path:)``, an I/O error naming the file (a full disk is
    /// ``CaskError/diskFull(path:)``), or `.io(…, errno: .exists)` when `destination` exists or
    /// lies inside the store.
    @discardableResult
    public func backup(
        to destination: String, method: BackupMethod = .linkWherePossible, verify: Bool = false,
        progress: ((Progress) -> Void)? = nil
    ) throws(CaskError) -> BackupReport {
        if isClosed.load(ordering: .relaxed) { throw CaskError.closed(path: directory) }
        let target = StoreRepair.trimmingSlashes(destination)
        var writer = BackupWriter(store: directory, destination: target, method: method, encryption: encryption, fileSystem: fileSystem)
        try writer.checkDestination()
        var report: BackupReport
        if self.writer != nil {
            // No compaction may remove a segment, or add one, while its files are placed.
            report = try compactionGate.withLock { (_) throws(CaskError) -> BackupReport in
                try writer.write(try writableSnapshot(), progress: progress)
            }
        } else {
            report = try writer.write(try readOnlySnapshot(), progress: progress)
        }
        if verify { report.verificationProblems = Self.problems(of: report, encryption: options.encryption, fileSystem: fileSystem) }
        return report
    }

    /// The store at the end of the last commit: under the writer mutex, the buffer flushed, the
    /// active segment's end and the segments the state lists then.
    private func writableSnapshot() throws(CaskError) -> BackupWriter.Snapshot {
        guard let writer else { preconditionFailure("a writable store has a writer") }
        let (listed, ends) = try writer.withLock { (w) throws(CaskError) -> (Listed, [UInt64: Int64]) in
            try w.checkUsable()
            try Self.flushBuffer(&w, bufferLimit: options.bufferSize, state: state)
            return (try listSegments(), [w.active.id: w.end])
        }
        return try snapshot(listed, ends: ends)
    }

    /// A read-only store's view: what its open or last refresh read of each segment, the one a
    /// writer appends to up to its content end (which leaves out a write in progress and a batch
    /// not yet committed).
    private func readOnlySnapshot() throws(CaskError) -> BackupWriter.Snapshot {
        let (listed, ends) = try refreshEnds.withLock { (ends) throws(CaskError) -> (Listed, [UInt64: Int64]) in
            (try listSegments(), ends)
        }
        return try snapshot(listed, ends: ends)
    }

    private typealias Listed = (snapshot: BackupWriter.Snapshot, files: [SegmentFile])

    /// The segment files of the state, in id order, with its keys and each segment's highest seq.
    private func listSegments() throws(CaskError) -> Listed {
        try state.read { (shared) throws(CaskError) -> Listed in
            if shared.closed { throw CaskError.closed(path: directory) }
            var snapshot = BackupWriter.Snapshot()
            var files: [SegmentFile] = []
            for stats in shared.stats.segments.sorted(by: { $0.id < $1.id }) {
                guard let file = shared.segments[UInt32(stats.id)] else { continue }
                files.append(file)
                snapshot.sealedMaxSeq[stats.id] = stats.maxSeq
            }
            snapshot.keys = shared.index.count
            return (snapshot, files)
        }
    }

    /// The listed segments, each to be placed whole (sealed: never changes) or copied up to a
    /// length. The active segment — by the rule every open follows
    /// (``StoreDirectory/activeSegment(among:newest:newestIsTornCreation:)``), which the copy's open will follow too —
    /// is copied up to its end in `ends` (the whole file when absent): a writer appends to it,
    /// here and in the copy, so it must never be a second name of the other's file.
    private func snapshot(_ listed: Listed, ends: [UInt64: Int64]) throws(CaskError) -> BackupWriter.Snapshot {
        var snapshot = listed.snapshot
        var headers: [(id: UInt64, baseSeq: UInt64?)] = []
        var newestIsTornCreation = false
        for file in listed.files {
            // Through the file held open (the state's), read as the active one to tell a torn creation.
            let length: Int64
            do { length = try fileSystem.fileSize(file.fd) } catch {
                throw CaskError.from(error, operation: "fstat", path: file.path, reading: true)
            }
            var reader = SegmentReader(file: file, length: length, isActive: true, lockHeld: false, encryption: encryption, fileSystem: fileSystem)
            switch try StoreDirectory.headerState(&reader) {
            case .valid(let baseSeq): headers.append((file.id, baseSeq))
            case .tornCreation:
                headers.append((file.id, nil))
                // Whether it has a hint file, as the copy's open will judge it: the copy gets the
                // hint only if it can be opened here (``BackupWriter``).
                let hinted = (try? fileSystem.fileSize(atPath: directory + "/" + SegmentName.hint(file.id))) != nil
                newestIsTornCreation = file.id == listed.files.last?.id && !hinted
            case .damaged: headers.append((file.id, nil))
            }
        }
        let active = listed.files.last.flatMap {
            StoreDirectory.activeSegment(among: headers, newest: $0.id, newestIsTornCreation: newestIsTornCreation)
        }
        for file in listed.files {
            var copiedLength: Int64?
            if file.id == active {
                let length: Int64
                do { length = try fileSystem.fileSize(file.fd) } catch {
                    throw CaskError.from(error, operation: "fstat", path: file.path, reading: true)
                }
                copiedLength = min(ends[file.id] ?? length, length)
            }
            snapshot.segments.append(.init(file: file, copiedLength: copiedLength))
        }
        return snapshot
    }

    /// What is wrong with the backup `report` describes: damage or hints that disagree
    /// (``verify(at:progress:)``), an open that is not clean, other keys or another last seq.
    private static func problems(of report: BackupReport, encryption: Encryption, fileSystem: any FileSystem) -> [String] {
        let path = report.destination
        var problems: [String] = []
        do {
            let verification = try StoreVerifier(directory: path, encryption: encryption, fileSystem: fileSystem).run()
            problems += verification.damagedRanges.map { "damage in the copy: \($0)" }
            problems += verification.invalidHints.map { "hint file of the copy disagrees with its segment: \($0)" }
            var options = Options()
            options.readOnly = true
            options.fileSystem = fileSystem
            options.encryption = encryption
            let copy = try CaskStore.open(at: path, options: options)
            defer { try? copy.close() }
            if !copy.recoveryReport.isClean {
                problems.append("the copy does not open clean: \(copy.recoveryReport)")
            }
            let (keys, lastSeq) = copy.state.read { shared in
                (shared.index.count, shared.stats.segments.compactMap(\.maxSeq).max() ?? 0)
            }
            if keys != report.keys { problems.append("\(path) holds \(keys) keys; the store had \(report.keys)") }
            if lastSeq != report.lastSeq { problems.append("\(path) ends at seq \(lastSeq); the store was at seq \(report.lastSeq)") }
        } catch {
            problems.append("cannot check \(path): \(error)")
        }
        return problems
    }
}
