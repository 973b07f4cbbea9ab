#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Applying a plan: each step durable before the next.
extension StoreRepair {
    // MARK: Applying

    func apply(_ plan: inout Plan, progress: ((CaskStore.Progress) -> Void)?) throws(CaskError) {
        if let identity = plan.identityFile {
            // First: nothing of an encrypted store opens without it.
            let identityPath = path(EncryptionFile.fileName)
            do throws(Errno) { try fileSystem.writeFileAtomically(identityPath, directory: directory, bytes: identity) } catch {
                throw CaskError.from(error, operation: "write", path: identityPath)
            }
        }
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
            if let rewrite = repair.rewrite { meter.total += rewrite.pieces.reduce(Int64(rewrite.header.byteCount)) { $0 + $1.length } }
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
                try self.rewrite(segmentPath, header: rewrite.header, pieces: rewrite.pieces, sourceSalt: repair.sourceSalt, meter: &meter)
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
    /// syncs the directory: a crash leaves the old segment or the new one, never a mix. An encrypted
    /// segment is written with a new salt, each record sealed again at its new place
    /// (``resealed(_:at:opening:sealing:at:)``); `sourceSalt` is the salt its records were sealed with.
    func rewrite(
        _ segmentPath: String, header plannedHeader: SegmentHeader, pieces: [Piece], sourceSalt: [UInt8]?, meter: inout ProgressMeter
    ) throws(CaskError) {
        var header = plannedHeader
        var newCipher: FileCipher?, oldCipher: FileCipher?
        if let encryption, header.sealing != nil {
            let (salt, cipher) = encryption.newCipher()
            header.sealing!.salt = salt
            newCipher = cipher
            oldCipher = sourceSalt.map { encryption.cipher(salt: $0) }
        }
        let temporary = segmentPath + ".tmp"
        do throws(Errno) {
            let source = try fileSystem.openFile(segmentPath, flags: O_RDONLY, mode: 0)
            let output = try fileSystem.openFile(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            do throws(Errno) {
                try header.encoded(cipher: newCipher).withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.descriptor, from: raw, at: 0) }
                var position = Int64(header.byteCount)
                meter.advance(by: position)
                for piece in pieces {
                    switch piece {
                    case .copy(let offset, let length) where newCipher != nil:
                        guard let oldCipher else { throw Errno.invalidArgument }  // planned only from an authentic header
                        let bytes = try resealed(source.descriptor, at: offset, length: length, opening: oldCipher, sealing: newCipher!, at: position)
                        try bytes.withUnsafeBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.descriptor, from: raw, at: position) }
                        meter.advance(by: length)
                        position += Int64(bytes.count)
                    case .copy(let offset, let length):
                        try copy(from: source.descriptor, at: offset, length: length, to: output.descriptor, at: position, meter: &meter)
                        position += length
                    case .bytes(let bytes):
                        var record = ByteBuffer(capacity: bytes.count + FileCipher.tagLength)
                        // An encrypted store's segments name no key prefix.
                        if let newCipher, case .success(let parsed) = bytes.withBytes({ RecordHeader.parse($0, keyPrefixLength: 0) }) {
                            _ = bytes.withBytes { plain in
                                RecordEncoder.appendRecord(
                                    plain: plain, header: parsed, clearingBatchMember: false, cipher: newCipher, offset: position, to: &record)
                            }
                        } else {
                            bytes.withBytes { record.append($0) }
                        }
                        try record.withUnsafeBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.descriptor, from: raw, at: position) }
                        meter.advance(by: Int64(record.count))
                        position += Int64(record.count)
                    }
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

    /// The records `offset ..< offset + length` of the file open as `fd` (whole valid records, as the
    /// scan found them), each opened with `oldCipher` at its place and sealed with `newCipher` at
    /// its new one, from `position` on. Throws `.invalidArgument` when a record does not open (it
    /// did when the segment was read: the file changed since).
    private func resealed(
        _ fd: Int32, at offset: Int64, length: Int64, opening oldCipher: FileCipher, sealing newCipher: FileCipher, at position: Int64
    ) throws(Errno) -> ByteBuffer {
        var source = [UInt8](repeating: 0, count: Int(length))
        let read = try source.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(fd, into: raw, at: offset) }
        guard read == source.count else { throw Errno.invalidArgument }
        var output = ByteBuffer(capacity: source.count)
        var plain = ByteBuffer(capacity: 4096)
        var at = 0
        while at < source.count {
            let ok = source.withUnsafeBytes { raw -> Bool in
                let rest = UnsafeRawBufferPointer(rebasing: raw[at...])
                guard case .success(let header) = RecordHeader.validate(rest, keyPrefixLength: 0), header.isEncrypted else { return false }
                plain.count = 0
                var authentic = false
                plain.appendWithUnsafeSpace(header.payloadEnd) { space in
                    space.baseAddress!.copyMemory(from: rest.baseAddress!, byteCount: header.headerLength)
                    authentic = oldCipher.open(
                        UnsafeRawBufferPointer(rebasing: rest[header.headerLength..<header.payloadEnd]), tag: rest.baseAddress! + header.payloadEnd,
                        associatedData: UnsafeRawBufferPointer(rebasing: rest[4..<header.headerLength]), number: UInt64(offset) + UInt64(at),
                        into: space.baseAddress! + header.headerLength)
                    return header.payloadEnd
                }
                guard authentic else { return false }
                _ = plain.withUnsafeBytes { plainBytes in
                    RecordEncoder.appendRecord(
                        plain: plainBytes, header: header, clearingBatchMember: false, cipher: newCipher,
                        offset: position + Int64(output.count), to: &output)
                }
                at += header.recordLength
                return true
            }
            guard ok else { throw Errno.invalidArgument }
        }
        return output
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
        var reader = SegmentReader(
            fd: fd, id: id, path: segmentPath, length: length, isActive: false, lockHeld: true, encryption: encryption, fileSystem: fileSystem)
        _ = try? reader.readHeader()
        let file = SegmentFile(
            id: id, path: segmentPath, fd: fd, length: length, fileSystem: fileSystem, sealing: reader.sealing, keyPrefix: reader.keyPrefix)
        switch try HintWriter.write(for: file, length: length, directory: directory, encryption: encryption, fileSystem: fileSystem) {
        case .written:
            return try size(of: SegmentName.hint(id))
        case .skippedCorrupt, .skippedRetired:
            throw CaskError.corruptFile(path: segmentPath, reason: "still damaged after its repair; no hint file written")
        }
    }
}
