import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads a file line by line: lines end with a newline (the last one may not), and are returned
/// without it. Reads 64 KiB at a time and holds at most one line plus one read in memory; a line
/// longer than `maxLineLength` is a data error, so input with no newlines cannot fill memory.
struct LineReader {
    private let handle: FileHandle
    /// Where every byte read is copied as well (the spool of an input read twice), if anywhere.
    private let copy: FileHandle?
    /// Shown in errors: a path, or "standard input".
    private let name: String
    private let maxLineLength: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false
    /// The number of the line last returned (1-based).
    private(set) var lineNumber = 0
    /// Bytes of the lines returned so far, newlines included.
    private(set) var bytesConsumed: Int64 = 0

    init(_ handle: FileHandle, name: String, maxLineLength: Int, copyingTo copy: FileHandle? = nil) {
        self.handle = handle
        self.name = name
        self.maxLineLength = maxLineLength
        self.copy = copy
    }

    /// The next line, or nil at the end of the input.
    mutating func next() throws(ToolError) -> ArraySlice<UInt8>? {
        var searched = 0  // bytes after `start` known to hold no newline
        while true {
            if let newline = ByteScan.newline(in: buffer, from: start + searched) {
                return take(upTo: newline, skipping: 1)
            }
            searched = buffer.count - start
            if searched > maxLineLength {
                throw .data("line \(lineNumber + 1) of \(name) is longer than \(maxLineLength) bytes")
            }
            if atEnd {
                return start < buffer.count ? take(upTo: buffer.count, skipping: 0) : nil
            }
            try fill()
        }
    }

    private mutating func take(upTo end: Int, skipping separator: Int) -> ArraySlice<UInt8> {
        let line = buffer[start..<end]
        bytesConsumed += Int64(end - start + separator)
        lineNumber += 1
        start = end + separator
        return line
    }

    /// Appends the next read to the buffer, first dropping the lines already returned.
    private mutating func fill() throws(ToolError) {
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        // One read(2) per fill, and its 0 is the end: a terminal's end of input (Ctrl-D) is given
        // once, and `FileHandle.read(upToCount:)`, which reads on until it has the count, swallowed
        // it with the last line, so the next fill waited for more input forever.
        let filled = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: Self.readSize))
        var count: Int
        repeat {
            count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress! + filled, Self.readSize) }
        } while count < 0 && errno == EINTR
        let cause = count < 0 ? String(cString: strerror(errno)) : nil
        buffer.removeLast(Self.readSize - max(0, count))
        if let cause { throw .failure("cannot read \(name): \(cause)") }
        guard count > 0 else {
            atEnd = true
            return
        }
        if let copy {
            let chunk = Data(buffer[filled...])
            do { try copy.write(contentsOf: chunk) } catch {
                throw .failure("cannot copy \(name) to a temporary file: \(error.localizedDescription)")
            }
        }
    }

    private static let readSize = 64 << 10
}
