#if canImport(Glibc)
import Glibc
#endif

extension CaskStore {
    /// Copies the store in `directory` into a new store under another key (`to`): to rotate its key,
    /// to encrypt a store created without one (`from: .none`), to decrypt one (`to: .none`), or to
    /// change its algorithm (`.key(key, algorithm:)`). No other process may have the store open for
    /// writing (its lock is held throughout: ``CaskError/locked(path:holderPID:)``).
    ///
    /// How, and why it is safe to interrupt at any instant: the store is opened with `from` (a
    /// writable open: a torn tail is cut, as always); every entry — key, value and expiry, each key's
    /// newest — is written into a new store in a directory beside it (`<directory>.cask-rekey-<pid>-<n>`,
    /// built like any store: its segments synced, its hints written); that store is opened again and
    /// its key count checked; then the two directories' names are swapped in one step
    /// (`renameat2(RENAME_EXCHANGE)`) and the parent directory synced. Before the swap the store is
    /// untouched (a crash leaves the new directory beside it: delete it); after it, the store is the
    /// new one, and the old one's files are deleted (a crash leaves the old store under the
    /// `.cask-rekey-` name, and a `REKEYED` file in the new store naming it: the store's next
    /// writable open deletes it). Overwritten and deleted values
    /// are not copied: nothing sealed under the old key remains once the old directory is gone —
    /// but the old key still opens any backup made before.
    ///
    /// The new store has new sequence numbers, segment ids and (encrypted) a new store id and salts.
    /// Read-only handles open on the old store go on reading it until they are closed. Complexity: one
    /// read of every live entry, one write of each; the parent directory must be writable and on the
    /// same file system. A store whose open finds damage is refused (``CaskError/corruptFile(path:reason:)``):
    /// repair it first. `progress`: phase ``Progress/Phase/rekeying``, entries copied of the entries held.
    public static func rekey(
        at directory: String, from old: Encryption, to new: Encryption, progress: ((Progress) -> Void)? = nil
    ) throws(CaskError) -> RekeyReport {
        let fileSystem = PosixFileSystem()
        if let length = new.invalidKeyLength {
            throw CaskError.invalidEncryptionKey(reason: "the new key is \(length) bytes; a key is \(EncryptionKey.length)")
        }
        if !old.isRequested && !new.isRequested {
            throw CaskError.io(operation: "rekey (neither the store nor the new store is encrypted: nothing to change)", path: directory, errno: .invalidArgument)
        }
        let path: String
        do throws(Errno) { path = try fileSystem.resolvedPath(StoreRepair.trimmingSlashes(directory)) } catch {
            if error == .noEntry { throw CaskError.directoryMissing(path: directory) }
            throw CaskError.from(error, operation: "open store directory", path: directory, reading: true)
        }
        var report = RekeyReport(directory: path)

        var oldOptions = Options.maintenance(encryption: old)
        oldOptions.createIfMissing = false  // nor a store: a directory of one's own is refused (`notAStore`)
        // Its close, after the swap, must write nothing: its path then names the new store.
        oldOptions.writeHints = false
        let store = try CaskStore.open(at: path, options: oldOptions)
        defer { try? store.close() }
        // The copy would hold an older value of a key whose newest record is damaged, and the
        // damaged bytes would go with the old directory: a damaged store is repaired first.
        report.truncations = store.recoveryReport.truncations
        let damage = store.recoveryReport.damagedRanges
        if !damage.isEmpty {
            throw CaskError.corruptFile(
                path: path, reason: "opening it skipped \(damage.count) damaged range\(damage.count == 1 ? "" : "s") (\(damage[0])); repair it first ('cask recover'), then rekey it — nothing was changed")
        }
        report.bytesBefore = try store.statistics().segmentBytes

        let temporary = try makeTemporaryDirectory(beside: path, fileSystem: fileSystem)
        do throws(CaskError) {
            report.keys = try copyEntries(of: store, into: temporary, encryption: new, progress: progress)
            var checkOptions = Options.maintenance(encryption: new)
            checkOptions.readOnly = true
            let copy = try CaskStore.open(at: temporary, options: checkOptions)
            let (copied, bytes) = (copy.count, try copy.statistics().segmentBytes)
            try copy.close()
            guard copied == report.keys else {
                throw CaskError.corruptFile(path: temporary, reason: "the new store holds \(copied) keys after \(report.keys) were copied")
            }
            report.bytesAfter = bytes
            report.algorithm = new.key == nil ? nil : (new.algorithm ?? .preferred)
            // Names the directory the old store will have after the swap: if this process dies
            // before deleting it, the store's next writable open does.
            let markerPath = temporary + "/" + SegmentName.rekeyMarker
            do throws(Errno) {
                try fileSystem.writeFileAtomically(markerPath, directory: temporary, bytes: Array((basename(of: temporary) + "\n").utf8))
            } catch {
                throw CaskError.from(error, operation: "write the rekey marker", path: markerPath)
            }
            do throws(Errno) { try fileSystem.exchange(path, temporary) } catch {
                if error == .invalidArgument || error == .notSupported {
                    throw CaskError.io(
                        operation: "swap the store with its rekeyed copy (the file system cannot swap two names at once)", path: path, errno: error)
                }
                throw CaskError.from(error, operation: "swap the store with its rekeyed copy", path: path)
            }
        } catch {
            removeStore(at: temporary, fileSystem: fileSystem)
            throw error
        }
        // Swapped: the store is the new one from here, whatever happens next.
        try? fileSystem.syncDirectory(CaskStore.parent(of: path))
        // The old store is under the temporary name now: close it (its lock goes), then delete it.
        try? store.close()
        if !removeStore(at: temporary, fileSystem: fileSystem) { report.leftBehind = temporary }
        try? fileSystem.unlink(path + "/" + SegmentName.rekeyMarker)
        try? fileSystem.syncDirectory(path)
        return report
    }

    /// Finishes a key change that stopped after its swap (a writable open calls this when the
    /// store holds a `REKEYED` file): deletes the old store's files from the directory the marker
    /// names, the directory (unless other files are in it), then the marker. Only a directory beside the store, named as a rekey
    /// names it (`<store>.cask-rekey-<pid>-<n>`) and not a symbolic link, is touched; a marker
    /// naming anything else is left alone, as is anything that fails (the next open tries again).
    static func finishRekey(of path: String, fileSystem: any FileSystem) {
        let markerPath = path + "/" + SegmentName.rekeyMarker
        guard let file = try? fileSystem.openFile(markerPath, flags: O_RDONLY, mode: 0),
              let size = try? fileSystem.fileSize(file.descriptor), size <= 4096 else { return }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard let count = try? bytes.withUnsafeMutableBytes({ (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }),
              count == bytes.count, bytes.last == UInt8(ascii: "\n"),
              let name = String(validating: bytes.dropLast(), as: UTF8.self), isRekeyDirectoryName(name, of: path) else { return }
        let old = parent(of: path) + "/" + name
        var info = stat()
        if lstat(old, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else { return }
            removeStore(at: old, fileSystem: fileSystem)
            // Files that are not Cask's stay there, the directory with them; the marker goes once
            // none of the old store's are left.
            if let names = try? fileSystem.listDirectory(old), names.contains(where: StoreDirectory.isStoreFileName) { return }
        } else if errno != ENOENT {
            return
        }
        try? fileSystem.unlink(markerPath)
        try? fileSystem.syncDirectory(path)
    }

    /// Whether `name` is one ``makeTemporaryDirectory(beside:fileSystem:)`` gives for the store at `path`.
    private static func isRekeyDirectoryName(_ name: String, of path: String) -> Bool {
        let prefix = basename(of: path) + ".cask-rekey-"
        guard name.hasPrefix(prefix) else { return false }
        let numbers = name.dropFirst(prefix.count).split(separator: "-", omittingEmptySubsequences: false)
        return numbers.count == 2 && numbers.allSatisfy { !$0.isEmpty && $0.count <= 10 && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }

    private static func basename(of path: String) -> String {
        path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
    }

    /// Writes every entry of `store` into a new store in `directory` under `encryption`, each as a
    /// record of its own, and closes it (everything synced). Returns the entries copied.
    ///
    /// Not in atomic batches: the new store takes the old one's place only once it is whole (the
    /// swap), so a batch would buy nothing, and would cost much — a batch is applied whole or not at
    /// all, so a byte of one member damaged later would lose every entry of its batch, not one.
    private static func copyEntries(
        of store: CaskStore, into directory: String, encryption: Encryption, progress: ((Progress) -> Void)?
    ) throws(CaskError) -> Int {
        var options = Options.maintenance(encryption: encryption)
        options.durability = .buffered
        options.flushInterval = 0
        let copy = try CaskStore.open(at: directory, options: options)
        // Counted in entries, reported once per 1% of them (the meter counts bytes: 1 MiB at least).
        let total = Int64(store.count)
        var reported: Int64 = 0
        func report(_ done: Int64) {
            reported = done
            progress?(Progress(phase: .rekeying, done: done, total: total))
        }
        report(0)
        var copied = 0
        do {
            try store.forEachEntry { key, value, expiresAt in
                if let expiresAt { try copy.put(key, value, expiresAtMilliseconds: expiresAt) } else { try copy.put(key, value) }
                copied += 1
                if Int64(copied) - reported >= max(1, total / 100) { report(Int64(copied)) }
            }
        } catch let error as CaskError {
            try? copy.close()
            throw error
        } catch {
            try? copy.close()
            throw CaskError.io(operation: "rekey", path: directory, errno: .ioError)
        }
        try copy.close()
        if reported != Int64(copied) { report(Int64(copied)) }
        return copied
    }

    /// `<path>.cask-rekey-<pid>-<n>`, made new (mode 0700), the first free `n`.
    private static func makeTemporaryDirectory(beside path: String, fileSystem: any FileSystem) throws(CaskError) -> String {
        var number = 1
        while true {
            let candidate = "\(path).cask-rekey-\(getpid())-\(number)"
            do throws(Errno) {
                try fileSystem.makeDirectory(candidate, mode: 0o700)
                return candidate
            } catch {
                guard error == .exists, number < 1000 else { throw CaskError.from(error, operation: "create directory", path: candidate) }
                number += 1
            }
        }
    }

    /// Deletes the store files in `directory` (only names a store's files have), then the directory.
    /// Returns whether it is gone: it is not when it holds other files, which stay.
    @discardableResult
    private static func removeStore(at directory: String, fileSystem: any FileSystem) -> Bool {
        let names = (try? fileSystem.listDirectory(directory)) ?? []
        for name in names where StoreDirectory.isStoreFileName(name) {
            try? fileSystem.unlink(directory + "/" + name)
        }
        do { try fileSystem.removeDirectory(directory) } catch { return false }
        try? fileSystem.syncDirectory(CaskStore.parent(of: directory))
        return true
    }
}

extension CaskStore.Options {
    /// How maintenance (a rekey) opens a store: under `encryption`, nothing in the background.
    static func maintenance(encryption: Encryption) -> Self {
        var options = Self()
        options.encryption = encryption
        options.automaticCompaction = false
        options.idleCompactionDelay = 0
        return options
    }
}
