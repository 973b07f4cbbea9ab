#if canImport(Glibc)
import Glibc
#endif

/// Reads one segment file read-only, front to back: its header, then every record, reporting each
/// damaged byte range as a ``VerificationReport/Problem`` instead of throwing.
///
/// The one statement of how `verify` and `inspect` classify damage: a bad segment header is
/// `segmentHeader` (bytes `0 ..< 40`, or `16 ..< 24` for an id that disagrees with the file name);
/// bytes that are not a valid record are `record`, unless they run to the end of the last segment,
/// where they are `tornTail` (a crash, or an append in progress); zero bytes that run to the end
/// of a segment are space a writer reserved, not a problem. Records are validated as a scan
/// on open validates them (lengths and checksum, ``SegmentScanner``); payloads are not decompressed.
package struct SegmentInspector {
    package let fileSystem: any FileSystem

    package init(fileSystem: any FileSystem) {
        self.fileSystem = fileSystem
    }

    /// Inspects the segment `id` at `path`. Calls, in this order: `onOpen` once with the file's
    /// length and its header (nil when the header is invalid); then `onRecord` and `onProblem` in
    /// file order (a record's bytes are valid only during the call).
    ///
    /// Returns false, having called nothing, when the file does not exist (compaction may remove a
    /// segment between a directory listing and this call). Throws when the file cannot be opened or
    /// read, or was written by another version of Cask (its header names another format version or
    /// header length).
    package func inspect(
        id: UInt64, path: String, isLast: Bool,
        onOpen: (_ length: Int64, _ header: SegmentHeader?) -> Void,
        onRecord: (_ offset: Int64, RecordHeader, UnsafeRawBufferPointer) -> Void,
        onProblem: (VerificationReport.Problem) -> Void
    ) throws(CaskError) -> Bool {
        let fd: Int32
        do { fd = try fileSystem.open(path, flags: O_RDONLY, mode: 0) } catch {
            if error == .noEntry { return false }
            throw CaskError.from(error, operation: "open", path: path, reading: true)
        }
        defer { fileSystem.close(fd) }
        let length: Int64
        do { length = try fileSystem.fileSize(fd) } catch {
            throw CaskError.from(error, operation: "fstat", path: path, reading: true)
        }
        func problem(_ kind: VerificationReport.Problem.Kind, _ offset: Int64, _ length: Int64, _ reason: String) {
            onProblem(.init(kind: kind, file: path, offset: offset, length: length, reason: reason))
        }

        switch try SegmentHeader.read(fd: fd, path: path, fileSystem: fileSystem) {
        case .success(let header):
            onOpen(length, header)
            if header.segmentID != id {
                problem(.segmentHeader, 16, 8, "header names segment \(header.segmentID), file name says \(id)")
            }
        case .failure(.unsupportedVersion(let version)):
            throw CaskError.unsupportedFormat(path: path, version: version)
        case .failure(.unsupportedHeaderLength(let headerLength)):
            throw CaskError.corruptFile(path: path, reason: SegmentHeader.Problem.unsupportedHeaderLength(headerLength).explanation)
        case .failure(.tooShort) where isLast:
            onOpen(length, nil)
            problem(.tornTail, 0, length, "segment header is incomplete (\(length) of \(SegmentHeader.length) bytes)")
        case .failure(let header):
            onOpen(length, nil)
            problem(.segmentHeader, 0, min(length, Int64(SegmentHeader.length)), "invalid segment header: \(header.explanation)")
        }

        var scanner = SegmentScanner(fd: fd, path: path, fileLength: length, fileSystem: fileSystem)
        // A damaged range is reported once the next record shows it does not reach the end of the
        // file (which can come sooner than `length`: a live writer may give back reserved space).
        var held: SegmentScanner.CorruptRange?
        _ = try scanner.scan(
            from: min(Int64(SegmentHeader.length), length),
            onRecord: { offset, header, bytes in
                if let range = held { problem(.record, range.offset, range.length, range.reason) }
                held = nil
                onRecord(offset, header, bytes)
            },
            onCorrupt: { range in
                if let range = held { problem(.record, range.offset, range.length, range.reason) }
                held = range
            })
        // The last range reaches the end of the file. Zero bytes there are space a writer reserved.
        let end = scanner.fileLength
        if let tail = held, try !SegmentScanner.isReservedSpace(fd: fd, path: path, from: tail.offset, to: end, fileSystem: fileSystem) {
            problem(isLast ? .tornTail : .record, tail.offset, tail.length, tail.reason)
        }
        return true
    }
}
