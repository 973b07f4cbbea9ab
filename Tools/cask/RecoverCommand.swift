import Cask
import Foundation

/// `cask recover <dir> [--dry-run] [--backup <dir>] [--json] [--key-file <file>]`
struct RecoverCommand: Subcommand {
    static let help = CommandHelp(
        name: "recover",
        abstract: "Repair a damaged store (backing up what it changes).",
        discussion: [
            "Cuts torn tails, rewrites damaged segments with every intact record copied byte for byte (the records after a damaged range included), writes invalid hint files again, removes leftover temporary files, and finishes a compaction a crash interrupted. A delete lost in a damaged range is rebuilt from the segment's hint file when that file vouches for it; records that are lost are listed by key. Afterwards 'cask verify' finds the store clean.",
            "Before changing anything, copies every file it will change or remove into the backup directory (by default a new directory next to the store, <dir>.cask-backup-<UTC time>) and prints where: copying those files back into <dir> undoes the repair exactly. Prints each change: the file, what was done, and the bytes and records dropped.",
            "Takes the store's lock, so it refuses (exit 1) while another process has the store open for writing. Exits 0 when there was nothing to repair or the store was repaired; with --dry-run, exits 65 when there is something to repair (the plan is printed and nothing changes). Shows progress on standard error.",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [
            .init(name: "dry-run", valueName: nil, help: "Print what would be done, and change nothing (not even the lock file)."),
            .init(name: "backup", valueName: "dir", help: "Back up into this directory (created; if it exists it must be empty) instead of the default next to the store."),
            StoreAccess.jsonFlag,
            KeyFile.option,
        ])

    let directory: String
    let dryRun: Bool
    let backup: String?
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        dryRun = arguments.flag("dry-run")
        json = arguments.flag("json")
        if let bytes = arguments.option("backup") {
            guard var path = String(validating: bytes, as: UTF8.self), !path.isEmpty else {
                throw .usage("--backup needs a directory path in UTF-8")
            }
            while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
            guard path != directory else { throw .usage("--backup must name a directory other than the store's") }
            backup = path
        } else {
            backup = nil
        }
        encryption = try KeyFile.encryption(arguments)
    }

    struct Report: Encodable {
        struct Change: Encodable {
            /// truncate, rewrite, rebuild-hint, remove, finish-compaction
            var kind: String
            var file: String
            var bytesBefore: Int64
            var bytesAfter: Int64?
            var recordsDropped: Int
            var recordsRestored: Int
            var droppedRanges: [DamageOutput]
            var reason: String
        }

        struct LostRecord: Encodable {
            var file: String
            var offset: Int64
            var type: String
            var seq: UInt64
            var key: String?
            var keyBase64: String?
            var verified: Bool
        }

        var directory: String
        var dryRun: Bool
        /// True when there was nothing to repair.
        var clean: Bool
        var backupDirectory: String?
        var segments: Int
        var records: Int
        var bytes: Int64
        var changes: [Change]
        var lostRecords: [LostRecord]
        var recordsDropped: Int
        var recordsRestored: Int
        var bytesDropped: Int64
        /// After a repair: whether `verify` finds the store clean (nil in a dry run or when nothing was done).
        var verifiedClean: Bool?
        /// Stray files (a store file's name gone wrong): left alone.
        var ignoredFiles: [String]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        var reporter: ProgressReporter?
        var phase: CaskStore.Progress.Phase?
        let repair = try CaskError.wrap { () throws(CaskError) in
            try CaskStore.repair(at: directory, dryRun: dryRun, backupDirectory: backup, encryption: encryption) { progress in
                if progress.phase != phase {
                    reporter?.finish()
                    phase = progress.phase
                    reporter = ProgressReporter(label: progress.phase.rawValue, output: output)
                }
                reporter?.update(progress.done, of: progress.total)
            }
        }
        reporter?.finish()
        // Check the result the way a user would, with verify: a repair must leave a clean store.
        var verification: VerificationReport?
        if !dryRun && !repair.isClean {
            verification = try CaskError.wrap { () throws(CaskError) in try CaskStore.verify(at: directory, encryption: encryption) }
        }
        if json {
            try output.json(Self.report(repair, verifiedClean: verification?.isClean))
        } else {
            write(repair, verification: verification, to: output)
        }
        if let verification, !verification.isClean { return .dataError }
        return dryRun && !repair.isClean ? .dataError : .success
    }

    private func write(_ repair: RepairReport, verification: VerificationReport?, to output: Output) {
        output.line("Checked \(directory): \(Self.count(repair.segmentsChecked, "segment")), \(Self.count(repair.recordsChecked, "record")), \(Self.count(repair.bytesChecked, "byte")).")
        for file in repair.ignoredFiles { output.line("ignored: \(file)") }
        if repair.isClean {
            output.line("Nothing to repair.")
            return
        }
        let files = Set(repair.changes.map(\.file)).count
        if dryRun {
            output.line("Dry run, nothing was changed. Would back up \(Self.count(files, "file")) to \(repair.backupDirectory ?? "?"), then:")
        } else {
            output.line("Backed up \(Self.count(files, "file")) to \(repair.backupDirectory ?? "?") (copy them back into \(directory) to undo the repair).")
        }
        for change in repair.changes {
            var line = "\(change.kind.rawValue) \(change.file): \(change.reason)"
            switch change.kind {
            case .truncateSegment, .rewriteSegment:
                line += "; \(change.bytesBefore) -> \(change.bytesAfter ?? 0) bytes"
            case .rebuildHint, .rewriteEncryptionFile:
                if let after = change.bytesAfter { line += "; \(change.bytesBefore) -> \(after) bytes" }
            case .removeFile, .removeLeftover, .finishCompaction:
                line += "; \(Self.count(change.bytesBefore, "byte"))"
            }
            output.line(line)
            for range in change.droppedRanges { output.line("  dropped \(range.summary)") }
            if change.recordsDropped > 0 { output.line("  \(Self.count(change.recordsDropped, "intact record")) dropped") }
            if change.recordsRestored > 0 { output.line("  \(Self.count(change.recordsRestored, "record")) restored from the hint file") }
        }
        for lost in repair.lostRecords {
            let what = lost.verified ? "lost" : "possibly lost (only its damaged bytes say so)"
            output.line("\(what): \(lost.type) of key '\(KeyEscaping.escape(lost.key))' (seq \(lost.seq)) at \(lost.file) offset \(lost.offset)")
        }
        let ranges = repair.changes.reduce(0) { $0 + $1.droppedRanges.count }
        let summary = "\(Self.count(repair.changes.count, "change")), \(Self.count(repair.bytesDropped, "byte")) in \(Self.count(ranges, "range")) dropped, \(Self.count(repair.recordsDropped, "intact record")) dropped, \(Self.count(repair.recordsRestored, "record")) restored"
        if dryRun {
            output.line("Would repair: \(summary).")
        } else {
            output.line("Repaired: \(summary).")
            if let verification {
                if verification.isClean {
                    output.line("Verified: no damage found.")
                } else {
                    output.line("Verify still finds damage:")
                    for problem in verification.damagedRanges { output.line("corrupt: \(problem)") }
                    for hint in verification.invalidHints { output.line("invalid hint: \(hint)") }
                }
            }
        }
    }

    private static func count(_ number: some BinaryInteger, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }

    static func report(_ repair: RepairReport, verifiedClean: Bool?) -> Report {
        Report(
            directory: repair.directory, dryRun: repair.dryRun, clean: repair.isClean, backupDirectory: repair.backupDirectory,
            segments: repair.segmentsChecked, records: repair.recordsChecked, bytes: repair.bytesChecked,
            changes: repair.changes.map { change in
                Report.Change(
                    kind: change.kind.rawValue, file: change.file, bytesBefore: change.bytesBefore, bytesAfter: change.bytesAfter,
                    recordsDropped: change.recordsDropped, recordsRestored: change.recordsRestored,
                    droppedRanges: change.droppedRanges.map(DamageOutput.init),
                    reason: change.reason)
            },
            lostRecords: repair.lostRecords.map { lost in
                let text = String(validating: lost.key, as: UTF8.self)
                return Report.LostRecord(
                    file: lost.file, offset: lost.offset, type: lost.type.description, seq: lost.seq,
                    key: text, keyBase64: text == nil ? Data(lost.key).base64EncodedString() : nil, verified: lost.verified)
            },
            recordsDropped: repair.recordsDropped, recordsRestored: repair.recordsRestored, bytesDropped: repair.bytesDropped,
            verifiedClean: verifiedClean, ignoredFiles: repair.ignoredFiles)
    }
}
