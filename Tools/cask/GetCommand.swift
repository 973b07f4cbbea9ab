import Cask

/// `cask get <dir> <key> [--escaped] [--key-file <file>]`: the value goes to standard output.
struct GetCommand: Subcommand {
    static let help = CommandHelp(
        name: "get",
        abstract: "Write the value of a key to standard output.",
        discussion: [
            "Writes the value's bytes exactly, with no newline added. Exits 1 when the key has no value, and 65 when its record is damaged (no damaged bytes are written). When opening skipped damaged records elsewhere, a warning goes to standard error (the key's newest record may be among them) and the exit status is the key's. Opens the store read-only and takes no lock, so it works while another process writes.",
        ],
        arguments: [StoreAccess.directoryArgument, StoreAccess.keyArgument],
        options: [KeyEscaping.escapedFlag, KeyFile.option])

    let directory: String
    let key: [UInt8]
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        key = try StoreAccess.key(arguments)
        encryption = try KeyFile.encryption(arguments)
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let store = try StoreAccess.openForReading(directory, encryption: encryption)
        let value = try CaskError.wrap { () throws(CaskError) in try store.get(key) }
        _ = StoreAccess.warnOfSkippedDamage(store, in: directory, output: output)
        try StoreAccess.close(store)
        guard let value else {
            throw .failure("key '\(KeyEscaping.escape(key))' has no value in \(directory)")
        }
        output.write(value)
        return .success
    }
}
