import Cask

/// `cask delete <dir> <key> [--escaped] [--key-file <file>]`
struct DeleteCommand: Subcommand {
    static let help = CommandHelp(
        name: "delete",
        abstract: "Delete a key.",
        discussion: [
            "Exits 1, writing nothing, when the key has no value. Takes the store's lock, so it fails while another process has the store open for writing. The deletion is on disk (fdatasync) when the command exits 0.",
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
        let store = try StoreAccess.openForWriting(directory, encryption: encryption, createIfMissing: false, output: output)
        let existed = try CaskError.wrap { () throws(CaskError) in try store.delete(key) }
        try StoreAccess.close(store)
        guard existed else {
            throw .failure("key '\(KeyEscaping.escape(key))' has no value in \(directory); nothing was deleted")
        }
        return .success
    }
}
