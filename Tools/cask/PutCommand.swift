import Cask

/// `cask put <dir> <key> [--escaped] [--key-file <file>]`: the value comes from standard input.
struct PutCommand: Subcommand {
    static let help = CommandHelp(
        name: "put",
        abstract: "Store standard input as the value of a key.",
        discussion: [
            "Reads standard input to its end and stores its bytes, unchanged, as the value of <key>, replacing any previous value. Creates the store when <dir> does not exist (encrypted, when --key-file is given). Takes the store's lock, so it fails while another process has the store open for writing. The value is on disk (fdatasync) when the command exits 0.",
            "A value is at most \(CaskStore.Options().maxValueSize) bytes (64 MiB): reading stops at the first byte over that, and the command exits 65 with nothing written. A key is 1 to \(Limits.maxKeyLength) bytes.",
        ],
        arguments: [StoreAccess.directoryArgument, StoreAccess.keyArgument],
        options: [KeyEscaping.escapedFlag, KeyFile.creatingOption])

    let directory: String
    let key: [UInt8]
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        key = try StoreAccess.key(arguments)
        encryption = try KeyFile.encryption(arguments)
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        // Read first, so the lock is held only for the write itself.
        let value = try StandardInput.readAll(limit: CaskStore.Options().maxValueSize)
        let store = try StoreAccess.openForWriting(directory, encryption: encryption, createIfMissing: true, output: output)
        try CaskError.wrap { () throws(CaskError) in try store.put(key, value) }
        try StoreAccess.close(store)
        return .success
    }
}
