#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The backup a repair makes of every file it will change, before changing any.
extension StoreRepair {
    // MARK: Backing up

    static func trimmingSlashes(_ path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        return trimmed
    }

    /// `<parent>/<store>.cask-backup-<UTC time>`, next to the store directory, numbered if taken.
    func defaultBackupDirectory() -> String {
        var components: [Substring] = []
        let absolute = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        for component in absolute.split(separator: "/") {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        let name = components.popLast().map(String.init) ?? "store"
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
        let base = "/" + components.joined(separator: "/") + (components.isEmpty ? "" : "/") + "\(name).cask-backup-\(stamp)"
        var candidate = base
        var number = 2
        while fileSystem.isDirectory(candidate) != nil {
            candidate = "\(base)-\(number)"
            number += 1
        }
        return candidate
    }

    /// Refuses a backup directory that is the store or lies inside it (the repair would copy files
    /// into the store it changes). A missing parent is left for ``makeBackup(of:in:progress:)`` to
    /// report; any other failure to tell is an error.
    func checkBackupOutsideTheStore(_ backup: String) throws(CaskError) {
        let existing = fileSystem.isDirectory(backup) == true ? backup : CaskStore.parent(of: backup)
        let inside: Bool
        do { inside = try fileSystem.directory(existing, isWithin: directory) } catch {
            if error == .noEntry { return }
            throw CaskError.from(error, operation: "open directory", path: existing, reading: true)
        }
        if inside {
            throw CaskError.io(operation: "create backup directory (it must lie outside the store)", path: backup, errno: .invalidArgument)
        }
    }

    /// Copies `names` from the store directory into `backup` (created, or empty), durably. On a
    /// failure (a full disk, say) it removes the files it made there, and the directory if it made
    /// it, before throwing: a partial backup left behind would be taken for one, and its truncated
    /// copies put back as the undo. Nothing of the store has changed by then.
    func makeBackup(of names: [String], in backup: String, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) {
        var madeDirectory = false
        do throws(Errno) {
            switch fileSystem.isDirectory(backup) {
            case .some(true):
                guard try fileSystem.listDirectory(backup).isEmpty else { throw Errno.exists }
            case .some(false):
                throw Errno.notDirectory
            case .none:
                try fileSystem.makeDirectory(backup, mode: 0o700)
                madeDirectory = true
                try fileSystem.syncDirectory(CaskStore.parent(of: backup))
            }
        } catch {
            let why = error == .exists ? " (it must be new or empty)" : ""
            throw CaskError.io(operation: "create backup directory\(why)", path: backup, errno: error)
        }
        var made: [String] = []
        func undo() {
            for target in made { try? fileSystem.unlink(target) }
            if madeDirectory { try? fileSystem.removeDirectory(backup) }
        }
        var meter = ProgressMeter(phase: .backingUp, total: 0, report: progress)
        for name in names { meter.total += (try? size(of: name)) ?? 0 }
        meter.report(0)
        for name in names {
            let target = backup + "/" + name
            do throws(Errno) {
                let source = try fileSystem.openFile(path(name), flags: O_RDONLY, mode: 0)
                let output = try fileSystem.openFile(target, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
                made.append(target)
                let length = try fileSystem.fileSize(source.descriptor)
                try copy(from: source.descriptor, at: 0, length: length, to: output.descriptor, at: 0, meter: &meter)
                try fileSystem.fdatasync(output.descriptor)
            } catch {
                undo()
                throw CaskError.from(error, operation: "back up \(path(name)) to", path: target)
            }
        }
        meter.finish()
        do { try fileSystem.syncDirectory(backup) } catch {
            undo()
            throw CaskError.from(error, operation: "sync backup directory", path: backup)
        }
    }

    /// Copies `length` bytes (``FileSystem/copyAll(from:at:to:at:length:advance:)``); a source
    /// shorter than that is an I/O error.
    func copy(from source: Int32, at offset: Int64, length: Int64, to output: Int32, at outputOffset: Int64, meter: inout ProgressMeter) throws(Errno) {
        try fileSystem.copyAll(from: source, at: offset, to: output, at: outputOffset, length: length) { meter.advance(by: $0) }
    }
}
