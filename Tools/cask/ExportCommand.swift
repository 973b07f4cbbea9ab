import Cask
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cask export <dir> [--prefix <prefix>] [--escaped] [--output <file>] [--key-file <file>]`
struct ExportCommand: Subcommand {
    static let help = CommandHelp(
        name: "export",
        abstract: "Write keys, values and expiries as JSON Lines.",
        discussion: [
            "Writes one JSON object per key, one per line, keys in bytewise order, object keys sorted: {\"key\":\"user/42\",\"value\":\"Ada\"}. A key or value that is valid UTF-8 is a JSON string under \"key\" or \"value\"; any other is base64 (RFC 4648, padded) under \"keyBase64\" or \"valueBase64\". A key that expires also has \"expiresAtMilliseconds\", its expiry time in milliseconds since 1970-01-01 UTC. Deleted and expired keys are left out. 'cask import' reads this back, reproducing keys, values and expiries exactly.",
            "Opens the store read-only and takes no lock, so it works while another process writes; the export is the store as it was when opened. A damaged record stops the export with exit 65 ('cask verify' lists the damage); when opening skipped damaged records, everything that could be read is exported, a warning goes to standard error, and the exit status is 65. With --output, a regular file (or a new one) is written under a temporary name next to it and renamed into place only when complete; a FIFO, terminal or device is written through, never replaced; a directory, a dangling link or a path inside the store is refused. Shows progress on standard error (a bar on a terminal, plain lines otherwise).",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [
            .init(name: "prefix", valueName: "prefix", help: "Only keys that start with these bytes."),
            KeyEscaping.escapedFlag,
            .init(name: "output", valueName: "file", help: "Write to this file (mode 0600) instead of standard output."),
            KeyFile.option,
        ])

    let directory: String
    let prefix: [UInt8]
    let outputPath: String?
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        prefix = try arguments.option("prefix").map { (value) throws(ToolError) in try arguments.key(value, label: "--prefix") } ?? []
        outputPath = try arguments.option("output").map { (bytes) throws(ToolError) in
            guard !bytes.isEmpty else { throw .usage("--output must name a file") }
            guard let path = String(validating: bytes, as: UTF8.self) else {
                throw .usage("--output is not valid UTF-8: '\(KeyEscaping.escape(bytes))' (\(ParsedArguments.utf8PathsOnly))")
            }
            return path
        }
        encryption = try KeyFile.encryption(arguments)
    }

    /// Lines are gathered in a buffer of about this size, then written out at once.
    private static let chunkSize = 256 << 10
    /// Progress is updated once per this many keys (an update reads the clock).
    private static let progressStride = 4096

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let sink = try outputPath.map { (path) throws(ToolError) in try OutputFile(path: path, storeDirectory: directory) }
        let store = try StoreAccess.openForReading(directory, encryption: encryption)
        defer { try? store.close() }
        let range = KeyRange.prefix(prefix)
        let total = try CaskError.wrap { () throws(CaskError) in try store.count(in: range) }
        let damaged = StoreAccess.warnOfSkippedDamage(store, in: directory, output: output)
        let progress = ProgressReporter(label: "exporting", output: output, unit: .items("keys"))
        progress.update(0, of: Int64(total))
        var chunk = ByteSink(capacity: Self.chunkSize + (64 << 10))
        func writeChunk() throws(ToolError) {
            try chunk.withUnsafeBytes { (bytes) throws(ToolError) in
                if let sink { try sink.write(bytes) } else { output.write(bytes) }
            }
            chunk.removeAll()
        }
        var exported = 0
        // The ordered walk reads each record where the index points, in key order, and lends its
        // key and value: no listing of the keys first, no look-up or array per key. A key deleted
        // or expired since the open is not visited.
        do {
            try store.forEachEntry(in: range) { key, value, expiresAt in
                ExportLineWriter.append(key: key, value: value, expiresAtMilliseconds: expiresAt, to: &chunk)
                exported += 1
                if chunk.count >= Self.chunkSize { try writeChunk() }
                if exported % Self.progressStride == 0 { progress.update(Int64(exported), of: Int64(max(total, exported))) }
            }
        } catch let error as ToolError {
            throw error
        } catch let error as CaskError {
            throw ToolError.store(error)
        } catch {
            throw ToolError.failure("\(error)")
        }
        try writeChunk()
        progress.update(Int64(exported), of: Int64(max(total, exported)))
        progress.finish()
        if let sink, let outputPath {
            try sink.commit()
            // Written through a FIFO or device (perhaps standard output itself), the summary goes
            // to standard error, out of the export's way.
            let summary = "exported \(exported) \(exported == 1 ? "key" : "keys") to \(outputPath)"
            if sink.isStaged { output.line(summary) } else { output.error(summary + "\n") }
        }
        return damaged ? .dataError : .success
    }
}
