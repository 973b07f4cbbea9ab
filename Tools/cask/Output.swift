import Cask
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Standard output (buffered, binary-safe) and standard error, written with `write(2)` only, so
/// bytes go out exactly as given and in order.
final class Output {
    private var buffer: [UInt8] = []
    private static let bufferLimit = 64 << 10
    /// The first failure to write standard output (reported once, at exit).
    private(set) var failure: Errno?

    init() { buffer.reserveCapacity(Self.bufferLimit) }

    func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Writes `bytes` (valid during the call): buffered when small, else through at once.
    func write(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count >= Self.bufferLimit {
            flush()
            writeAll(1, bytes)
        } else {
            buffer.append(contentsOf: bytes)
            if buffer.count >= Self.bufferLimit { flush() }
        }
    }

    func write(_ text: String) {
        write(Array(text.utf8))
    }

    /// Lets `body` append to the buffer in place (no array of its own to copy), then writes the
    /// buffer out once it holds 64 KiB: for a command that prints line after line, fast.
    func append<Failure: Error>(_ body: (inout [UInt8]) throws(Failure) -> Void) throws(Failure) {
        try body(&buffer)
        if buffer.count >= Self.bufferLimit { flush() }
    }

    /// Writes `text` followed by a newline.
    func line(_ text: String) {
        write(text + "\n")
    }

    /// Writes `value` as pretty-printed JSON with sorted keys, followed by a newline.
    func json<T: Encodable>(_ value: T) throws(ToolError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            write(Array(try encoder.encode(value)) + [UInt8(ascii: "\n")])
        } catch {
            throw .failure("cannot encode JSON: \(error)")
        }
    }

    /// Writes to standard error (after flushing standard output, to keep the two in order).
    func error(_ text: String) {
        flush()
        Array(text.utf8).withUnsafeBytes { writeAll(2, $0) }
    }

    func flush() {
        guard !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { writeAll(1, $0) }
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) {
        var done = 0
        while done < raw.count {
            let written = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
            if written < 0 {
                if errno == EINTR { continue }
                if fd == 1, failure == nil { failure = Errno(rawValue: errno) }
                return
            }
            done += written
        }
    }
}

/// Standard input, read to its end.
enum StandardInput {
    /// All bytes of standard input, at most `limit`. Reading stops at the first byte over the limit
    /// (an endless input such as `yes` is not read on), which is a data error: nothing larger than
    /// the limit is held in memory, and nothing is written.
    static func readAll(limit: Int) throws(ToolError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            // Ask for no more than one byte past the limit.
            let wanted = min(chunk.count, limit + 1 - bytes.count)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress!, wanted) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .failure("cannot read standard input: \(Errno(rawValue: errno))")
            }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
            if bytes.count > limit {
                throw .data("the value on standard input is over the limit of \(limit) bytes (reading stopped at byte \(limit + 1)); nothing was written")
            }
        }
    }
}
