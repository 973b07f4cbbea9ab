import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The input of `cask import`, read twice: once to check every line, then to import it.
///
/// A regular file (named with `--input`, or redirected to standard input) is read again from where
/// the first read started. Anything else (a pipe, a terminal) is copied during the first read to
/// a temporary file that is unlinked at once, so nothing is left behind, and the second read
/// comes from that copy.
final class ImportInput {
    /// Shown in messages: the path, or "standard input".
    let name: String
    /// The bytes to read when known in advance (a regular file), for progress.
    let knownSize: Int64?
    private let handle: FileHandle
    private let startOffset: UInt64
    private var spool: FileHandle?

    init(path: String?) throws(ToolError) {
        if let path {
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)
            guard fd >= 0 else { throw .failure("cannot open \(path): \(String(cString: strerror(errno)))") }
            handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            name = path
        } else {
            handle = FileHandle.standardInput
            name = "standard input"
        }
        var info = stat()
        guard fstat(handle.fileDescriptor, &info) == 0 else {
            let cause = errno == EBADF ? "it is closed" : String(cString: strerror(errno))
            throw .failure("cannot read \(name): \(cause); give --input <file> or redirect a file to it")
        }
        if info.st_mode & S_IFMT == S_IFDIR { throw .failure("cannot read \(name): it is a directory; name a file") }
        let isRegular = (info.st_mode & S_IFMT) == S_IFREG
        startOffset = isRegular ? ((try? handle.offset()) ?? 0) : 0
        knownSize = isRegular ? max(0, Int64(info.st_size) - Int64(startOffset)) : nil
        if !isRegular { spool = try Self.makeSpool() }
    }

    deinit {
        try? spool?.close()
        if name != "standard input" { try? handle.close() }
    }

    /// The reader for the first pass.
    func firstReading(maxLineLength: Int) -> LineReader {
        LineReader(handle, name: name, maxLineLength: maxLineLength, copyingTo: spool)
    }

    /// The reader for the second pass: the same bytes again.
    func secondReading(maxLineLength: Int) throws(ToolError) -> LineReader {
        let source = spool ?? handle
        do { try source.seek(toOffset: spool == nil ? startOffset : 0) } catch {
            throw .failure("cannot read \(name) again: \(error.localizedDescription)")
        }
        return LineReader(source, name: name, maxLineLength: maxLineLength)
    }

    private static func makeSpool() throws(ToolError) -> FileHandle {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cask-import-\(getpid())-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
              let spool = FileHandle(forUpdatingAtPath: path) else {
            throw .failure("cannot create a temporary file at \(path) to hold standard input; set TMPDIR, or use --input")
        }
        try? FileManager.default.removeItem(atPath: path)
        return spool
    }
}
