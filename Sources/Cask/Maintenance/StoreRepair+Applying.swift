#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Applying a plan: each step durable before the next.
extension StoreRepair {
    // MARK: Applying

    func apply(_ plan: inout Plan, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) {
        for (name, syncAfter) in plan.removals {
            do throws(Errno) {
                do { try fileSystem.unlink(path(name)) } catch where error == .noEntry {}
                if syncAfter { try fileSystem.syncDirectory(directory) }
            } catch {
                throw CaskError.from(error, operation: "remove", path: path(name))
            }
        }
        var meter = ProgressMeter(phase: .repairing, total: 0, report: progress)
        for repair in plan.segments {
            if let rewrite = repair.rewrite { meter.total += rewrite.pieces.reduce(Int64(SegmentHeader.length)) { $0 + $1.length } }
        }
        meter.report(0)
        for repair in plan.segments {
            let segmentPath = path(SegmentName.segment(repair.id))
            let hintPath = path(SegmentName.hint(repair.id))
            if repair.rewrite != nil || repair.truncateTo != nil, repair.hintChange != nil {
                // A hint must never describe the old layout of a segment that has a new one.
                do throws(Errno) {
                    try fileSystem.unlink(hintPath)
                    try fileSystem.syncDirectory(directory)
                } catch {
                    throw CaskError.from(error, operation: "remove", path: hintPath)
                }
            }
            if let length = repair.truncateTo {
                do throws(Errno) {
                    let file = try fileSystem.openFile(segmentPath, flags: O_RDWR, mode: 0)
                    try fileSystem.ftruncate(file.descriptor, length: length)
                    try fileSystem.fdatasync(file.descriptor)
                } catch where error == .hardLinked {
                    // A sealed segment that a backup also names: cut a copy, so that the
                    // backup's file stays as it was.
                    try rewrite(segmentPath, keeping: length, meter: &meter)
                } catch {
                    throw CaskError.from(error, operation: "truncate", path: segmentPath)
                }
            }
            if let rewrite = repair.rewrite {
                try self.rewrite(segmentPath, header: rewrite.header, pieces: rewrite.pieces, meter: &meter)
            }
            if let index = repair.hintChange {
                plan.report.changes[index].bytesAfter = try rebuildHint(repair.id)
            }
        }
        meter.finish()
    }

    /// Cuts the segment at `length` by writing its first `length` bytes to `<segment>.tmp`,
    /// renamed over it: for a segment with other hard links (a backup's), whose other names must
    /// keep the file as it is. A crash leaves the old segment or the cut one.
    func rewrite(_ segmentPath: String, keeping length: Int64, meter: inout ProgressMeter) throws(CaskError) {
        let temporary = segmentPath + ".tmp"
        do throws(Errno) {
            let source = try fileSystem.openFile(segmentPath, flags: O_RDONLY, mode: 0)
            let output = try fileSystem.openFile(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            do throws(Errno) {
                try copy(from: source.descriptor, at: 0, length: length, to: output.descriptor, at: 0, meter: &meter)
                try fileSystem.fdatasync(output.descriptor)
                output.close()  // before the rename
                try fileSystem.rename(temporary, to: segmentPath)
                try fileSystem.syncDirectory(directory)
            } catch {
                try? fileSystem.unlink(temporary)
                throw error
            }
        } catch {
            throw CaskError.from(error, operation: "cut a copy of segment", path: segmentPath)
        }
    }

    /// Writes the repaired segment as `<segment>.tmp`, syncs it, renames it over the segment and
    /// syncs the directory: a crash leaves the old segment or the new one, never a mix.
    func rewrite(_ segmentPath: String, header: SegmentHeader, pieces: [Piece], meter: inout ProgressMeter) throws(CaskError) {
        let temporary = segmentPath + ".tmp"
        do throws(Errno) {
            let source = try fileSystem.openFile(segmentPath, flags: O_RDONLY, mode: 0)
            let output = try fileSystem.openFile(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            do throws(Errno) {
                try header.encoded().withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.descriptor, from: raw, at: 0) }
                var position = Int64(SegmentHeader.length)
                meter.advance(by: position)
                for piece in pieces {
                    switch piece {
                    case .copy(let offset, let length):
                        try copy(from: source.descriptor, at: offset, length: length, to: output.descriptor, at: position, meter: &meter)
                    case .bytes(let bytes):
                        try bytes.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.descriptor, from: raw, at: position) }
                        meter.advance(by: Int64(bytes.count))
                    }
                    position += piece.length
                }
                try fileSystem.fdatasync(output.descriptor)
            } catch {
                try? fileSystem.unlink(temporary)
                throw error  // `output`, then `source`, close as the error leaves their scope: after the unlink.
            }
            output.close()  // before the rename
            do throws(Errno) {
                try fileSystem.rename(temporary, to: segmentPath)
                try fileSystem.syncDirectory(directory)
            } catch {
                try? fileSystem.unlink(temporary)
                throw error
            }
        } catch {
            throw CaskError.from(error, operation: "rewrite segment", path: segmentPath)
        }
    }

    /// Writes the hint file of a segment from a scan of it; returns the hint file's size.
    func rebuildHint(_ id: UInt64) throws(CaskError) -> Int64 {
        let segmentPath = path(SegmentName.segment(id))
        let fd: Int32
        let length: Int64
        do throws(Errno) {
            let opened = try fileSystem.openFile(segmentPath, flags: O_RDONLY, mode: 0)
            length = try fileSystem.fileSize(opened.descriptor)
            fd = opened.take()
        } catch {
            throw CaskError.from(error, operation: "open", path: segmentPath, reading: true)
        }
        // The file object owns the descriptor from here, and closes it.
        let file = SegmentFile(id: id, path: segmentPath, fd: fd, length: length, fileSystem: fileSystem)
        switch try HintWriter.write(for: file, length: length, directory: directory, fileSystem: fileSystem) {
        case .written:
            return try size(of: SegmentName.hint(id))
        case .skippedCorrupt, .skippedRetired:
            throw CaskError.corruptFile(path: segmentPath, reason: "still damaged after its repair; no hint file written")
        }
    }
}
