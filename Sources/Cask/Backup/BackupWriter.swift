#if canImport(Glibc)
import Glibc
#endif

/// The files of a backup (``CaskStore/backup(to:method:verify:progress:)``): builds the copy of a
/// snapshot of the store in a directory of its own making, each file synced, then renames that
/// directory to the destination. Touches nothing in the store: its files are read through the
/// descriptors the store holds, or given a second name that is checked to be the file held.
struct BackupWriter {
    /// What to copy: the segments of one moment of the store, and what the store held then.
    struct Snapshot {
        struct Segment {
            let file: SegmentFile
            /// The active segment: copied up to its last commit. Nil for a sealed segment, which
            /// never changes: placed whole, its hint file beside it.
            let copiedLength: Int64?
        }

        var segments: [Segment] = []
        /// The highest seq of each segment's records, as the store counted them: for a sealed
        /// segment, what the copy holds (the active one's may count a batch not yet committed).
        var sealedMaxSeq: [UInt64: UInt64] = [:]
        var keys = 0
    }

    let store: String
    let destination: String
    let method: CaskStore.BackupMethod
    /// The store's encryption (nil: not encrypted): its `ENCRYPTION` file goes into the copy, whose
    /// active segment is read back with it.
    let encryption: StoreEncryption?
    let fileSystem: any FileSystem
    /// Whether to try a link for the next sealed file: until one fails for a reason that would
    /// fail them all (another file system, or one without hard links).
    private var linking: Bool
    /// The names made in the temporary directory so far, to remove if the backup fails.
    private var made: [String] = []

    init(store: String, destination: String, method: CaskStore.BackupMethod, encryption: StoreEncryption?, fileSystem: any FileSystem) {
        self.encryption = encryption
        self.store = store
        self.destination = destination
        self.method = method
        self.fileSystem = fileSystem
        linking = method == .linkWherePossible
    }

    // MARK: The destination

    /// Refuses a destination that exists (whatever it is), whose parent is not a directory, or that
    /// lies inside the store (its parent, or a directory above that, is the store directory).
    func checkDestination() throws(CaskError) {
        guard !destination.isEmpty else { throw CaskError.io(operation: "back up (no destination given)", path: store, errno: .invalidArgument) }
        if fileSystem.isDirectory(destination) != nil {
            throw CaskError.io(operation: "back up into (a backup makes a new directory; this one exists)", path: destination, errno: .exists)
        }
        let parent = CaskStore.parent(of: destination)
        guard fileSystem.isDirectory(parent) == true else {
            throw CaskError.io(operation: "back up into (the directory to hold the backup must exist)", path: parent, errno: .noEntry)
        }
        let inside: Bool
        do { inside = try fileSystem.directory(parent, isWithin: store) } catch {
            throw CaskError.from(error, operation: "open directory", path: parent, reading: true)
        }
        if inside {
            throw CaskError.io(operation: "back up into a directory inside the store", path: destination, errno: .invalidArgument)
        }
    }

    // MARK: Writing

    /// Places every file of `snapshot` in a new temporary directory, then renames it to the
    /// destination. On failure removes what it made, and throws.
    mutating func write(_ snapshot: Snapshot, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) -> CaskStore.BackupReport {
        var report = CaskStore.BackupReport(destination: destination)
        report.keys = snapshot.keys
        var meter = ProgressMeter(phase: .backingUp, total: 0, report: progress)
        for segment in snapshot.segments {
            meter.total += segment.copiedLength ?? ((try? fileSystem.fileSize(segment.file.fd)) ?? 0)
        }
        meter.report(0)
        let temporary = try makeTemporaryDirectory()
        do throws(CaskError) {
            try placeEncryptionFile(in: temporary, report: &report)
            try placeDictionaries(of: snapshot, in: temporary, report: &report)
            for segment in snapshot.segments {
                try place(segment, of: snapshot, in: temporary, report: &report, meter: &meter)
            }
            try finish(temporary)
        } catch {
            for name in made { try? fileSystem.unlink(temporary + "/" + name) }
            try? fileSystem.removeDirectory(temporary)
            throw error
        }
        meter.finish()
        return report
    }

    /// `<destination>.incomplete-<pid>-<n>`, made new (mode 0700), the first free `n`.
    private func makeTemporaryDirectory() throws(CaskError) -> String {
        var number = 1
        while true {
            let path = "\(destination).incomplete-\(getpid())-\(number)"
            do throws(Errno) {
                try fileSystem.makeDirectory(path, mode: 0o700)
                return path
            } catch {
                guard error == .exists, number < 1000 else { throw CaskError.from(error, operation: "create backup directory", path: path) }
                number += 1
            }
        }
    }

    /// Syncs the temporary directory, renames it to the destination (never over anything that
    /// appeared there meanwhile) and syncs the parent: from then on the backup is complete.
    private mutating func finish(_ temporary: String) throws(CaskError) {
        do { try fileSystem.syncDirectory(temporary) } catch {
            throw CaskError.from(error, operation: "sync backup directory", path: temporary)
        }
        do throws(Errno) {
            do { try fileSystem.renameNoReplace(temporary, to: destination) } catch where error == .invalidArgument {
                // A file system that cannot promise not to replace: check, then rename (which
                // replaces only an empty directory made in between).
                if fileSystem.isDirectory(destination) != nil { throw Errno.exists }
                try fileSystem.rename(temporary, to: destination)
            }
        } catch {
            throw CaskError.io(
                operation: error == .exists
                    ? "back up into (something is there: a directory made meanwhile, a file, or a link, dangling or not; a backup makes a new directory)"
                    : "rename \(temporary) to",
                path: destination, errno: error)
        }
        made = []
        do { try fileSystem.syncDirectory(CaskStore.parent(of: destination)) } catch {
            throw CaskError.from(error, operation: "sync directory", path: CaskStore.parent(of: destination))
        }
    }

    /// Writes an encrypted store's `ENCRYPTION` file into `temporary`, from the store's memory (the
    /// bytes it checked when it opened), synced.
    private mutating func placeEncryptionFile(in temporary: String, report: inout CaskStore.BackupReport) throws(CaskError) {
        guard let encryption else { return }
        try write(encryption.identityFile, named: EncryptionFile.fileName, in: temporary, operation: "write ENCRYPTION file")
        report.bytesCopied += Int64(encryption.identityFile.count)
    }

    /// Writes `bytes` as a new file `name` of `temporary`, synced.
    private mutating func write(_ bytes: [UInt8], named name: String, in temporary: String, operation: String) throws(CaskError) {
        let target = temporary + "/" + name
        do throws(Errno) {
            let output = try fileSystem.openFile(target, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            made.append(name)
            try bytes.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.descriptor, from: raw, at: 0) }
            try fileSystem.fdatasync(output.descriptor)
        } catch {
            throw CaskError.from(error, operation: operation, path: target)
        }
    }

    /// Writes the dictionaries the snapshot's segments name into `temporary`, from the store's
    /// memory (the bytes of their files, checked when they were loaded), each synced. One a segment
    /// names that could not be loaded is left out: the copy reports it as the store does.
    private mutating func placeDictionaries(of snapshot: Snapshot, in temporary: String, report: inout CaskStore.BackupReport) throws(CaskError) {
        var written: Set<UInt32> = []
        for segment in snapshot.segments {
            guard let dictionary = segment.file.dictionary.loaded, written.insert(dictionary.id).inserted else { continue }
            let bytes = dictionary.fileBytes
            try write(bytes, named: SegmentName.dictionary(UInt64(dictionary.id)), in: temporary, operation: "write dictionary")
            report.bytesCopied += Int64(bytes.count)
            report.dictionaryFiles += 1
        }
    }

    /// Places one segment (and a sealed one's hint file) in `temporary`.
    private mutating func place(
        _ segment: Snapshot.Segment, of snapshot: Snapshot, in temporary: String, report: inout CaskStore.BackupReport, meter: inout ProgressMeter
    ) throws(CaskError) {
        let file = segment.file
        let name = SegmentName.segment(file.id)
        if let length = segment.copiedLength {
            try copy(file.fd, length: length, named: name, source: file.path, in: temporary, meter: &meter)
            report.segmentsCopied += 1
            report.bytesCopied += length
            report.lastSeq = max(report.lastSeq, try lastSeq(of: temporary + "/" + name, id: file.id, length: length))
            return
        }
        report.lastSeq = max(report.lastSeq, snapshot.sealedMaxSeq[file.id] ?? 0)
        let length: Int64
        do { length = try fileSystem.fileSize(file.fd) } catch {
            throw CaskError.from(error, operation: "fstat", path: file.path, reading: true)
        }
        if try link(file.fd, from: file.path, named: name, in: temporary) {
            report.segmentsLinked += 1
            report.bytesLinked += length
            meter.advance(by: length)
        } else {
            try copy(file.fd, length: length, named: name, source: file.path, in: temporary, meter: &meter)
            report.segmentsCopied += 1
            report.bytesCopied += length
        }
        // The hint: a cache the copy's open checks against its segment, so one that cannot be read
        // here is left out (the copy's first writable open writes it again).
        let hintName = SegmentName.hint(file.id), hintPath = store + "/" + hintName
        guard let hint = try? fileSystem.openFile(hintPath, flags: O_RDONLY, mode: 0),
              let hintLength = try? fileSystem.fileSize(hint.descriptor)
        else { return }
        var ignored = ProgressMeter(phase: .backingUp, total: 0, report: nil)
        if try link(hint.descriptor, from: hintPath, named: hintName, in: temporary) {
            report.bytesLinked += hintLength
        } else {
            try copy(hint.descriptor, length: hintLength, named: hintName, source: hintPath, in: temporary, meter: &ignored)
            report.bytesCopied += hintLength
        }
        report.hintFiles += 1
    }

    /// The highest seq in the copied active segment at `path`: it ends at a commit, so every
    /// record in it is committed. O(its bytes), read back from the page cache.
    private func lastSeq(of path: String, id: UInt64, length: Int64) throws(CaskError) -> UInt64 {
        let opened: OpenFile
        do { opened = try fileSystem.openFile(path, flags: O_RDONLY, mode: 0) } catch {
            throw CaskError.from(error, operation: "open", path: path, reading: true)
        }
        var reader = SegmentReader(
            fd: opened.descriptor, id: id, path: path, length: length, isActive: true, lockHeld: true, encryption: encryption, fileSystem: fileSystem)
        guard try reader.readHeader().header != nil else { return 0 }
        var batch = BatchAssembler()
        var highest: UInt64 = 0
        _ = try reader.readRecords(from: reader.contentStart, batch: &batch) { _, header, _ in highest = max(highest, header.seq) }
        return highest
    }

    /// Gives the file open as `fd` (named `source` in the store) the name `name` in `temporary`,
    /// and syncs it; false when that cannot be done (then nothing is left under `name`). The name
    /// made is checked to be that file: one swapped in the store since it was opened is not linked.
    private mutating func link(_ fd: Int32, from source: String, named name: String, in temporary: String) throws(CaskError) -> Bool {
        guard linking else { return false }
        let target = temporary + "/" + name
        do throws(Errno) { try fileSystem.link(source, to: target) } catch {
            // Another file system, or one without hard links, fails every link: copy from here on.
            if error == Errno(rawValue: EXDEV) || error == .notSupported || error == Errno(rawValue: EPERM) { linking = false }
            return false
        }
        made.append(name)
        do throws(Errno) {
            let linked = try fileSystem.openFile(target, flags: O_RDONLY, mode: 0)
            guard try fileSystem.identity(linked.descriptor) == fileSystem.identity(fd) else { throw Errno.exists }
            try fileSystem.fdatasync(linked.descriptor)  // a sealed segment of an `.os` store may not be on disk yet
            return true
        } catch {
            if error == .ioError || error == .noSpace { throw CaskError.from(error, operation: "sync", path: target) }
            made.removeLast()
            do { try fileSystem.unlink(target) } catch {
                throw CaskError.from(error, operation: "remove", path: target)
            }
            return false
        }
    }

    /// Copies the first `length` bytes of the file open as `fd` (named `source` in the store) to a
    /// new file `name` in `temporary`, and syncs it.
    private mutating func copy(
        _ fd: Int32, length: Int64, named name: String, source: String, in temporary: String, meter: inout ProgressMeter
    ) throws(CaskError) {
        let target = temporary + "/" + name
        do throws(Errno) {
            let output = try fileSystem.openFile(target, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            made.append(name)
            try fileSystem.copyAll(from: fd, at: 0, to: output.descriptor, at: 0, length: length) { meter.advance(by: $0) }
            try fileSystem.fdatasync(output.descriptor)
        } catch {
            throw CaskError.from(error, operation: "copy \(source) to", path: target)
        }
    }
}
