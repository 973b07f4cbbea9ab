#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension CaskStore {
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
    ///
    /// An encrypted store is repaired with its key (`encryption`). A segment it rewrites gets a new
    /// salt, and every record it keeps is sealed again at its new place (the one exception to "byte
    /// for byte": a place is never sealed twice); a segment whose header does not authenticate keeps
    /// none of its records (they cannot be told from forged ones), and its original stays in the backup.
    public static func repair(
        at directory: String, dryRun: Bool = false, backupDirectory: String? = nil, encryption: Encryption = .none,
        progress: ((Progress) -> Void)? = nil
    ) throws(CaskError) -> RepairReport {
        var repair = StoreRepair(directory: directory, encryption: encryption, fileSystem: PosixFileSystem())
        return try repair.run(dryRun: dryRun, backupDirectory: backupDirectory, progress: progress)
    }
}

/// The work behind ``CaskStore/repair(at:dryRun:backupDirectory:progress:)``: reads the store into
/// a plan (the report, and what to write), then backs up and applies it.
package struct StoreRepair {
    let directory: String
    let fileSystem: any FileSystem
    /// The encryption asked for; the store's, checked, once ``run(dryRun:backupDirectory:progress:)`` starts.
    let requested: Encryption
    /// Set by ``run(dryRun:backupDirectory:progress:)``: the store's encryption (nil: not encrypted)
    /// and its dictionaries.
    private(set) var encryption: StoreEncryption?
    private(set) var dictionaries: DictionaryCatalog

    package init(directory: String, encryption: Encryption = .none, fileSystem: any FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
        requested = encryption
        dictionaries = DictionaryCatalog(directory: directory, fileSystem: fileSystem, encryption: nil)
    }

    package mutating func run(
        dryRun: Bool, backupDirectory: String?, progress: ((CaskStore.Progress) -> Void)?
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
        let probe: OpenFile?
        if dryRun {
            lock = nil
            probe = try lockWithoutWriting()
        } else {
            lock = try StoreLock(directory: directory, fileSystem: fileSystem)
            probe = nil
        }
        defer {
            lock?.release()
            withExtendedLifetime(probe) {}  // The dry run's lock holds to here; `probe` closes next.
        }

        // An ENCRYPTION file that is missing or damaged is written again from an authentic segment header.
        var identityProblem: String?
        let identityPath = path(EncryptionFile.fileName)
        do {
            encryption = try StoreEncryption.open(directory: directory, requested: requested, creating: false, fileSystem: fileSystem)
        } catch .corruptFile(let failed, let reason) where failed == identityPath && requested.key != nil {
            guard let recovered = StoreEncryption.recoverIdentity(directory: directory, key: requested.key!, fileSystem: fileSystem) else {
                throw CaskError.corruptFile(
                    path: failed, reason: "\(reason); no segment header authenticates under the key given, so it cannot be written again")
            }
            encryption = recovered
            identityProblem = reason
        }
        dictionaries = DictionaryCatalog(directory: directory, fileSystem: fileSystem, encryption: encryption)
        // Without the lock (a dry run that could not take it), a writer may be appending: the reader
        // then treats a short active segment as one that may still grow.
        var plan = try makePlan(lockHeld: lock != nil || probe != nil, progress: progress)
        if let identityProblem, let identity = encryption?.identityFile {
            let exists = fileSystem.isDirectory(identityPath) == false
            plan.report.changes.insert(.init(
                kind: .rewriteEncryptionFile, file: identityPath, bytesBefore: exists ? try size(of: EncryptionFile.fileName) : 0,
                bytesAfter: Int64(identity.count),
                reason: "\(identityProblem); written again with the store id and algorithm of a segment header that authenticates under the key"),
                at: 0)
            plan.identityFile = identity
            if exists { plan.backupFiles.insert(EncryptionFile.fileName, at: 0) }
        }
        plan.report.dryRun = dryRun
        guard !plan.report.changes.isEmpty else { return plan.report }
        let backup = backupDirectory.map(Self.trimmingSlashes) ?? defaultBackupDirectory()
        if backup == Self.trimmingSlashes(directory) {
            throw CaskError.io(operation: "back up the store into itself", path: backup, errno: .exists)
        }
        try checkBackupOutsideTheStore(backup)  // a dry run says so too
        plan.report.backupDirectory = backup
        if dryRun { return plan.report }
        try makeBackup(of: plan.backupFiles, in: backup, progress: progress)
        try apply(&plan, progress: progress)
        return plan.report
    }

    func path(_ name: String) -> String { directory + "/" + name }

    // MARK: The lock

    /// A dry run changes nothing, the lock file included: it takes the lock on `LOCK` without
    /// writing its pid, and without creating the file (when there is none, no writer has the store).
    /// A `LOCK` this process may not read (another user's store) is not taken either: the dry run
    /// then reads the store as `verify` does, alongside any writer.
    ///
    /// Returns the lock file, open and locked (nil when not taken): the lock holds until it closes.
    func lockWithoutWriting() throws(CaskError) -> OpenFile? {
        let lockPath = path(SegmentName.lockFile)
        let file: OpenFile
        do { file = try fileSystem.openFile(lockPath, flags: O_RDONLY, mode: 0) } catch {
            if error == .noEntry || error == .permissionDenied { return nil }
            throw CaskError.from(error, operation: "open", path: lockPath)
        }
        do { try fileSystem.lock(file.descriptor, exclusive: true) } catch {
            // `file` closes as the error leaves: after the holder's pid is read from it.
            if error == .wouldBlock {
                throw CaskError.locked(path: directory, holderPID: StoreLock.readPID(fd: file.descriptor, fileSystem: fileSystem))
            }
            throw CaskError.from(error, operation: "flock", path: lockPath)
        }
        return file
    }

}
