import Cask
import Foundation

/// `cask import <dir> [--input <file>] [--batch-size <n>] [--json] [--key-file <file>]`
struct ImportCommand: Subcommand {
    static let help = CommandHelp(
        name: "import",
        abstract: "Put the entries of a 'cask export' file into a store.",
        discussion: [
            "Reads JSON Lines as 'cask export' writes them: one object per line with \"key\" or \"keyBase64\", \"value\" or \"valueBase64\", and optionally \"expiresAtMilliseconds\" (see 'cask help export'); blank lines are skipped. Each entry is put with its expiry, replacing the key's value; keys the input does not name are left alone. An entry whose expiry has passed is written too, and reads as absent.",
            "Checks every line before writing anything, strictly: JSON as RFC 8259 defines it, no field twice, base64 in its one canonical padded form, a byte-order mark only at the start of the input. A malformed line is reported with its line number (and the column, where there is one) and the command exits 65, having imported nothing (and created no store). Then it creates the store if <dir> does not exist (encrypted, when --key-file is given) and takes its lock, so it fails (exit 1) while another process has the store open for writing. Entries are written in atomic batches: after a crash, each batch is in the store in full or not at all. Everything is on disk (fdatasync) when the command exits 0.",
            "Standard input that is not a regular file (a pipe) is copied to an unlinked temporary file while it is checked, so that it can be read twice. Shows progress on standard error (a bar on a terminal, plain lines otherwise).",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [
            .init(name: "input", valueName: "file", help: "Read this file instead of standard input."),
            .init(name: "batch-size", valueName: "n",
                  help: "Entries per atomic batch, 1 to \(maxBatchSize) (default \(defaultBatchSize)); a batch closes early at \(batchByteLimit >> 20) MiB of keys and values."),
            StoreAccess.jsonFlag,
            KeyFile.creatingOption,
        ])

    static let defaultBatchSize = 1000
    static let maxBatchSize = 100_000
    /// Keeps one batch well inside a segment, whatever the entries' sizes.
    static let batchByteLimit = 16 << 20

    let directory: String
    let inputPath: String?
    let batchSize: Int
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        json = arguments.flag("json")
        inputPath = try arguments.option("input").map { (bytes) throws(ToolError) in
            guard !bytes.isEmpty else { throw .usage("--input must name a file") }
            guard let path = String(validating: bytes, as: UTF8.self) else {
                throw .usage("--input is not valid UTF-8: '\(KeyEscaping.escape(bytes))' (\(ParsedArguments.utf8PathsOnly))")
            }
            return path
        }
        if let text = arguments.option("batch-size") {
            guard let size = Int(String(decoding: text, as: UTF8.self)), (1...Self.maxBatchSize).contains(size) else {
                throw .usage("--batch-size must be a whole number from 1 to \(Self.maxBatchSize), not '\(KeyEscaping.escape(text))'")
            }
            batchSize = size
        } else {
            batchSize = Self.defaultBatchSize
        }
        encryption = try KeyFile.encryption(arguments)
    }

    /// What the first read found: the lines to import, their bytes, and the entries among them.
    private struct Checked {
        var lines: Int
        var bytes: Int64
        var entries: Int
    }

    private let maxValueSize = CaskStore.Options().maxValueSize
    /// JSON escapes a byte in at most 6 bytes ("\u0000"), base64 in 4/3.
    private var maxLineLength: Int { 6 * (maxValueSize + Limits.maxKeyLength) + 4096 }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let input = try ImportInput(path: inputPath)
        let checked = try check(input, output)
        let store = try StoreAccess.openForWriting(directory, encryption: encryption, createIfMissing: true, output: output)
        let batches: Int
        do throws(ToolError) { batches = try apply(input, checked, to: store, output) } catch {
            try? store.close()
            throw error
        }
        try StoreAccess.close(store)
        if json {
            try output.json(Report(directory: directory, input: input.name, entries: checked.entries, batches: batches))
        } else {
            output.line("imported \(Self.count(checked.entries, "entry", "entries")) from \(input.name) into \(directory) in \(Self.count(batches, "batch", "batches"))")
        }
        return .success
    }

    struct Report: Encodable {
        var directory: String
        var input: String
        var entries: Int
        var batches: Int
    }

    /// Reads every line and checks it, writing nothing: the first malformed line is a data error.
    private func check(_ input: ImportInput, _ output: Output) throws(ToolError) -> Checked {
        let progress = ProgressReporter(label: "checking", output: output)
        defer { progress.finish() }
        var reader = input.firstReading(maxLineLength: maxLineLength)
        var entries = 0
        var entry = ExportEntry(key: [], value: []), scratch = ExportLineParser.Scratch()
        while let line = try reader.next() {
            if let total = input.knownSize, reader.lineNumber % Self.progressStride == 1 { progress.update(reader.bytesConsumed, of: total) }
            if Self.isBlank(line) { continue }
            do { try ExportLine.decode(line, isFirstLine: reader.lineNumber == 1, maxValueSize: maxValueSize, into: &entry, scratch: &scratch) } catch {
                throw .data("line \(reader.lineNumber) of \(input.name): \(error.reason); nothing was imported")
            }
            entries += 1
        }
        if let total = input.knownSize { progress.update(reader.bytesConsumed, of: total) }
        return Checked(lines: reader.lineNumber, bytes: reader.bytesConsumed, entries: entries)
    }

    /// Reads the checked lines again and writes their entries in atomic batches; returns the number of batches.
    private func apply(_ input: ImportInput, _ checked: Checked, to store: CaskStore, _ output: Output) throws(ToolError) -> Int {
        let progress = ProgressReporter(label: "importing", output: output)
        defer { progress.finish() }
        var reader = try input.secondReading(maxLineLength: maxLineLength)
        var batch = WriteBatch(), batchBytes = 0
        var imported = 0, batches = 0
        func partly() -> String {
            "after \(imported) of \(checked.entries) entries were imported, in \(Self.count(batches, "batch", "batches"))"
        }
        func commit() throws(ToolError) {
            guard !batch.isEmpty else { return }
            do throws(CaskError) { try store.write(batch) } catch { throw .failure("\(error) (\(partly()))") }
            imported += batch.count
            batches += 1
            batch = WriteBatch()
            batchBytes = 0
            progress.update(reader.bytesConsumed, of: checked.bytes)
        }
        var entry = ExportEntry(key: [], value: []), scratch = ExportLineParser.Scratch()
        while reader.lineNumber < checked.lines, let line = try reader.next() {
            if Self.isBlank(line) { continue }
            do { try ExportLine.decode(line, isFirstLine: reader.lineNumber == 1, maxValueSize: maxValueSize, into: &entry, scratch: &scratch) } catch {
                throw .failure("\(input.name) changed while it was imported: line \(reader.lineNumber): \(error.reason) (\(partly()))")
            }
            if batch.count == batchSize || (!batch.isEmpty && batchBytes + entry.key.count + entry.value.count > Self.batchByteLimit) {
                try commit()
            }
            if let expiry = entry.expiresAtMilliseconds {
                batch.put(entry.key, entry.value, expiresAtMilliseconds: expiry)
            } else {
                batch.put(entry.key, entry.value)
            }
            batchBytes += entry.key.count + entry.value.count
        }
        try commit()
        progress.update(checked.bytes, of: checked.bytes)
        return batches
    }

    /// The first pass updates its progress once per this many lines (an update reads the clock).
    private static let progressStride = 1024

    private static func count(_ number: Int, _ one: String, _ many: String) -> String {
        "\(number) \(number == 1 ? one : many)"
    }

    /// Spaces, tabs and a carriage return only.
    private static func isBlank(_ line: ArraySlice<UInt8>) -> Bool {
        line.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r") }
    }
}
