import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `headlines.csv`: every run's measured targets, one row each, appended run after run (old rows
/// are never rewritten), so a ratio can be followed across commits without keeping every report.
///
/// Columns: the run (`date`, `run` — its results folder's name, `commit`, `run_kind`, `machine`,
/// `num`, `runs`), the target (`workload`, `mode`, `metric`), the medians of ops/s a ratio was
/// taken from (`cask`, `peer`, `peer_value`; empty for a median of per-run ratios, seconds or
/// bytes), the measured `value` in its `unit` (`ratio`, `s`, `B/key`), the `target` it is held
/// to (`>=2.5`, `<=0.3`) and whether it was `met` (`yes`, `no`, or `n/a` when the target does
/// not apply to the run's size). A target the run did not measure has no row.
enum HeadlineCSV {
    static let columns = [
        "date", "run", "commit", "run_kind", "machine", "num", "runs",
        "workload", "mode", "metric", "cask", "peer", "peer_value", "value", "unit", "target", "met",
    ]
    static let header = columns.joined(separator: ",")

    /// What identifies the run every row of it repeats.
    struct Run: Sendable {
        var date: String
        /// The results folder's name (`2026-12-02`, `2026-12-02-quick`).
        var name: String
        /// The checkout's HEAD when the run started (`68d5723`, `+dirty` with uncommitted changes to
        /// tracked files); empty when unknown.
        var commit: String
        /// `full`, `quick` or `partial` (see `BenchOptions.runKind`).
        var kind: String
        var machine: String
        var num: Int
        var runs: Int
    }

    /// One line (no newline) per measured target.
    static func rows(_ targets: [Target], run: Run) -> [String] {
        targets.compactMap { target in
            guard let value = target.value else { return nil }
            let (unit, format) = switch target.unit {
            case "×": ("ratio", "%.3f")
            case "s": ("s", "%.3f")
            default: (target.unit, "%.2f")
            }
            let bound = switch target.kind {
            case .atLeast(let bound): ">=" + number(bound)
            case .atMost(let bound): "<=" + number(bound)
            }
            let met = target.passed.map { $0 ? "yes" : "no" } ?? "n/a"
            let fields = [
                run.date, run.name, run.commit, run.kind, run.machine, "\(run.num)", "\(run.runs)",
                target.workload, target.mode, target.metric,
                target.cask.map { String(format: "%.0f", $0) } ?? "", target.peer ?? "", target.peerValue.map { String(format: "%.0f", $0) } ?? "",
                String(format: format, value), unit, bound, met,
            ]
            return fields.map(escape).joined(separator: ",")
        }
    }

    /// Appends `rows` to the CSV at `path`, creating it with its header when missing: opened with
    /// `O_APPEND`, one `write` per row, so rows of runs writing at the same time never interleave
    /// and a crash leaves at most the last row torn. Throws when the file's header is not this
    /// version's.
    static func append(_ rows: [String], to path: String) throws {
        try createIfMissing(path)
        let fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw FileError(path: path, what: "cannot be opened for appending: \(errnoText())") }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw FileError(path: path, what: "cannot be examined: \(errnoText())") }
        if status.st_size == 0 {
            try write(header + "\n", fd, path)
        } else {
            let first = try read(fd, path, at: 0, count: header.utf8.count + 1)
            guard first == header + "\n" else {
                throw FileError(path: path, what: "does not start with this version's header (\(header)); move it aside and run again, "
                               + "or add the missing columns to its rows")
            }
            // A row torn by a crash: end it, so that the next row starts on a line of its own.
            if try read(fd, path, at: Int64(status.st_size) - 1, count: 1) != "\n" { try write("\n", fd, path) }
        }
        for row in rows { try write(row + "\n", fd, path) }
        guard fsync(fd) == 0 else { throw FileError(path: path, what: "could not be synced: \(errnoText())") }
    }

    /// Creates the file with its header under a temporary name and links it into place, so that no
    /// reader or concurrent writer ever sees it without its header.
    private static func createIfMissing(_ path: String) throws {
        if access(path, F_OK) == 0 { return }
        let temporary = path + ".new-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileError(path: temporary, what: "cannot be created: \(errnoText())") }
        defer { unlink(temporary) }
        do { try write(header + "\n", fd, temporary) } catch { close(fd); throw error }
        close(fd)
        // EEXIST: another run created it first; its header is checked on open.
        guard link(temporary, path) == 0 || errno == EEXIST else { throw FileError(path: path, what: "cannot be created: \(errnoText())") }
    }

    /// One `write` of `text` (another only after a short write, which a regular file gives on a full disk).
    private static func write(_ text: String, _ fd: Int32, _ path: String) throws {
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw FileError(path: path, what: "could not be written: \(n < 0 ? errnoText() : "no progress")") }
            done += n
        }
    }

    private static func read(_ fd: Int32, _ path: String, at offset: Int64, count: Int) throws -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        while true {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw FileError(path: path, what: "could not be read: \(errnoText())") }
            return String(decoding: bytes.prefix(n), as: UTF8.self)
        }
    }

    /// `2.5`, `0.85`, `32`: the bound as the report writes it, without trailing zeros.
    private static func number(_ value: Double) -> String {
        value == value.rounded() ? String(format: "%.0f", value) : "\(value)"
    }

    /// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled.
    static func escape(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0.isNewline }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// A file of the benchmark's own (the CSV, a saved report) that could not be used, and why.
struct FileError: Error, CustomStringConvertible {
    let path: String
    let what: String
    var description: String { "\(path) \(what)" }
}
