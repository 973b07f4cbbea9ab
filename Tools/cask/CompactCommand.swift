import Cask
import Foundation

/// `cask compact <dir> [--json] [--key-file <file>]`
struct CompactCommand: Subcommand {
    static let help = CommandHelp(
        name: "compact",
        abstract: "Rewrite the store without its overwritten and deleted records.",
        discussion: [
            "Seals the active segment, then rewrites every segment that holds dead records, keeping only live ones, and deletes the old files. A crash at any moment leaves the store as it was before or after. Segments with damage are left alone: the damage opening the store found and the damage found while compacting are printed, the rest is compacted, and the exit status is 65 ('cask recover' repairs it).",
            "Takes the store's lock, so it refuses (exit 1) while another process has the store open. Shows progress on standard error (a bar on a terminal, plain lines otherwise) and prints the sizes before and after.",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [StoreAccess.jsonFlag, KeyFile.option])

    let directory: String
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        json = arguments.flag("json")
        encryption = try KeyFile.encryption(arguments)
    }

    struct Report: Encodable {
        var directory: String
        var diskBytesBefore: Int64
        var diskBytesAfter: Int64
        var segmentsCompacted: Int
        var segmentsWritten: Int
        var recordsCopied: Int
        var recordsDropped: Int
        var keys: Int
        var liveBytes: Int64
        var deadBytes: Int64
        var milliseconds: UInt64
        /// Damage the open found and damage found in segments chosen for compaction: the segments
        /// that hold it were left as they are.
        var damage: [DamageOutput]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let store = try StoreAccess.openForWriting(directory, encryption: encryption, createIfMissing: false, automaticCompaction: false, output: output)
        // Damage the open found (its segments are never compacted), then what compacting finds.
        var damage = store.recoveryReport.damagedRanges
        let before = try DiskUsage.bytes(of: directory)
        let progress = ProgressReporter(label: "compacting", output: output)
        let result = try CaskError.wrap { () throws(CaskError) in try store.compact { progress.update($0.done, of: $0.total) } }
        progress.finish()
        damage += result.damage
        let statistics = try CaskError.wrap { () throws(CaskError) in try store.statistics() }
        try StoreAccess.close(store)
        let report = Report(
            directory: directory, diskBytesBefore: before, diskBytesAfter: try DiskUsage.bytes(of: directory),
            segmentsCompacted: result.segmentsCompacted, segmentsWritten: result.segmentsWritten,
            recordsCopied: result.recordsCopied, recordsDropped: result.recordsDropped,
            keys: statistics.keys, liveBytes: statistics.liveBytes, deadBytes: statistics.deadBytes,
            milliseconds: result.milliseconds,
            damage: damage.map(DamageOutput.init))
        if json {
            try output.json(report)
        } else {
            output.line("compacted \(report.segmentsCompacted) segments into \(report.segmentsWritten) in \(report.milliseconds) ms")
            output.line("records: \(report.recordsCopied) kept, \(report.recordsDropped) dropped; \(report.keys) keys")
            output.line("disk: \(DiskUsage.format(report.diskBytesBefore)) -> \(DiskUsage.format(report.diskBytesAfter))")
            for range in damage {
                output.line("damaged, left as it is: \(range); run 'cask recover \(directory)'")
            }
        }
        return damage.isEmpty ? .success : .dataError
    }
}
