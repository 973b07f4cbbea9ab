import Cask

/// `cask verify <dir> [--json] [--key-file <file>]`
struct VerifyCommand: Subcommand {
    static let help = CommandHelp(
        name: "verify",
        abstract: "Check every record of every segment.",
        discussion: [
            "Reads every segment in full, ignoring hint files: checks each segment header, each record's lengths and checksum, and that each compressed value decompresses; then checks each hint file entry by entry against its segment. Prints the file and offset of each damaged byte range and each invalid hint file. Exits 0 when the store is clean and 65 when damage is found.",
            "Changes nothing and takes no lock, so it works while another process writes (an append in progress at the end of the active segment then shows as a torn tail). Shows progress on standard error (a bar on a terminal, plain lines otherwise).",
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
        struct Segment: Encodable {
            var id: UInt64
            var file: String
            var bytes: Int64
            var records: Int
            /// "absent", "valid" or "invalid".
            var hint: String
            var hintEntries: Int?
        }

        struct InvalidHint: Encodable {
            var file: String
            var reason: String
        }

        var directory: String
        var clean: Bool
        var records: Int
        var bytes: Int64
        var segments: [Segment]
        var problems: [DamageOutput]
        var invalidHints: [InvalidHint]
        /// Stray files (a store file's name gone wrong): ignored, reported, never removed.
        var ignoredFiles: [String]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let progress = ProgressReporter(label: "verifying", output: output)
        let verification = try CaskError.wrap { () throws(CaskError) in
            try CaskStore.verify(at: directory, encryption: encryption) { progress.update($0.done, of: $0.total) }
        }
        progress.finish()
        if json {
            try output.json(Self.report(verification))
        } else {
            output.line("Verified \(directory): \(Self.count(verification.segments.count, "segment")), \(Self.count(verification.recordsChecked, "record")), \(Self.count(verification.bytesChecked, "byte")).")
            for problem in verification.damagedRanges { output.line("corrupt: \(problem)") }
            for hint in verification.invalidHints { output.line("invalid hint: \(hint)") }
            for file in verification.ignoredFiles { output.line("ignored: \(file)") }
            if verification.isClean {
                output.line("No damage found.")
            } else {
                output.line("Damage found: \(Self.count(verification.damagedRanges.count, "damaged range")), \(Self.count(verification.invalidHints.count, "invalid hint file")).")
            }
        }
        return verification.isClean ? .success : .dataError
    }

    private static func count(_ number: some BinaryInteger, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }

    static func report(_ verification: VerificationReport) -> Report {
        Report(
            directory: verification.directory,
            clean: verification.isClean,
            records: verification.recordsChecked,
            bytes: verification.bytesChecked,
            segments: verification.segments.map { segment in
                var hint = "absent"
                var entries: Int?
                switch segment.hint {
                case .absent: break
                case .valid(let count, _):
                    hint = "valid"
                    entries = count
                case .invalid: hint = "invalid"
                }
                return Report.Segment(id: segment.id, file: segment.file, bytes: segment.bytes, records: segment.records, hint: hint, hintEntries: entries)
            },
            problems: verification.damagedRanges.map(DamageOutput.init),
            invalidHints: verification.invalidHints.map { Report.InvalidHint(file: $0.file, reason: $0.reason) },
            ignoredFiles: verification.ignoredFiles)
    }
}
