import Cask

/// `cask backup <dir> <dest> [--copy] [--verify] [--json] [--key-file <file>]`
struct BackupCommand: Subcommand {
    static let help = CommandHelp(
        name: "backup",
        abstract: "Make a consistent copy of the store, while it is in use.",
        discussion: [
            "Copies the store as it is when the command opens it (every commit up to one seq, never part of a batch) into <dest>, a new directory, which is then an ordinary store. Sealed segments never change: on the store's file system they get a second name in the backup (a hard link, so a backup of any size takes a moment), on another they are copied; the active segment is copied up to its last commit.",
            "The backup is built in <dest>.incomplete-<pid>-<n> and renamed to <dest> once every file and the directory are synced: a <dest> is always complete. A backup that fails removes that directory; one that is killed leaves it behind, to be deleted. The store is only read: no lock is taken and nothing in it changes, so this works while another process writes (a compaction it runs meanwhile does not disturb the backup).",
            "A linked backup shares the store's disk: ship it off the machine with any file copier (segments and hint files never change once written; see docs/backup.md). Exits 0 when the backup is made (and, with --verify, checks out), 65 when the store or the backup holds damage, 1 when it cannot be made.",
        ],
        arguments: [
            StoreAccess.directoryArgument,
            CommandHelp.Argument(name: "dest", help: "Where to make the backup: a directory that does not exist yet, outside the store."),
        ],
        options: [
            CommandHelp.Option(name: "copy", valueName: nil, help: "Copy every file, even on the store's file system (a backup that shares no block with the store)."),
            CommandHelp.Option(name: "verify", valueName: nil, help: "Then read every record of the backup back, check its hint files, and open it, as 'cask verify' does."),
            StoreAccess.jsonFlag,
            KeyFile.option,
        ])

    let directory: String
    let destination: String
    let copy: Bool
    let verify: Bool
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        destination = try arguments.path("dest")
        copy = arguments.flag("copy")
        verify = arguments.flag("verify")
        json = arguments.flag("json")
        encryption = try KeyFile.encryption(arguments)
    }

    struct Report: Encodable {
        var directory: String
        var destination: String
        var lastSeq: UInt64
        var keys: Int
        var segmentsLinked: Int
        var segmentsCopied: Int
        var hintFiles: Int
        var dictionaryFiles: Int
        var bytesLinked: Int64
        var bytesCopied: Int64
        /// With --verify: what is wrong with the backup (empty: it checked out); absent otherwise.
        var verificationProblems: [String]?
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let store = try StoreAccess.openForReading(directory, encryption: encryption)
        let damaged = StoreAccess.warnOfSkippedDamage(store, in: directory, output: output)
        let progress = ProgressReporter(label: "backing up", output: output)
        let backup = try CaskError.wrap { () throws(CaskError) in
            try store.backup(to: destination, method: copy ? .copy : .linkWherePossible, verify: verify) { progress.update($0.done, of: $0.total) }
        }
        progress.finish()
        try StoreAccess.close(store)
        let problems = backup.verificationProblems ?? []
        if json {
            try output.json(Report(
                directory: directory, destination: backup.destination, lastSeq: backup.lastSeq, keys: backup.keys,
                segmentsLinked: backup.segmentsLinked, segmentsCopied: backup.segmentsCopied, hintFiles: backup.hintFiles,
                dictionaryFiles: backup.dictionaryFiles, bytesLinked: backup.bytesLinked, bytesCopied: backup.bytesCopied, verificationProblems: backup.verificationProblems))
        } else {
            output.line(backup.description)
        }
        return damaged || !problems.isEmpty ? .dataError : .success
    }
}
