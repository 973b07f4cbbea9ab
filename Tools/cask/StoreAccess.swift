import Cask

/// How the subcommands open a store, and the arguments they share.
enum StoreAccess {
    static let directoryArgument = CommandHelp.Argument(name: "dir", help: "The store directory.")
    static let keyArgument = CommandHelp.Argument(
        name: "key", help: "The key: the bytes of the argument as given (see --escaped). Put '--' before a key that starts with '-'.")
    static let jsonFlag = CommandHelp.Option(name: "json", valueName: nil, help: "Print JSON instead of text (object keys sorted).")

    /// Read-only: no lock, nothing on disk changes; works while another process writes.
    /// `encryption`: the store's key (``KeyFile``), `.none` for a store that is not encrypted.
    static func openForReading(_ directory: String, encryption: Encryption) throws(ToolError) -> CaskStore {
        var options = CaskStore.Options()
        options.readOnly = true
        options.createIfMissing = false
        options.encryption = encryption
        return try CaskError.wrap { () throws(CaskError) in try CaskStore.open(at: directory, options: options) }
    }

    /// Takes the store's lock; fails with the holder's pid while another process writes. A store
    /// created here (`createIfMissing`) is encrypted when `encryption` holds a key. A torn tail the
    /// open cut (FORMAT.md, rule 4: bytes after the active segment's last valid record, which a
    /// write that did not finish leaves) is said on standard error, file, offset and length: the
    /// command goes on, but nothing is discarded without a word.
    static func openForWriting(
        _ directory: String, encryption: Encryption, createIfMissing: Bool, automaticCompaction: Bool = true, output: Output
    ) throws(ToolError) -> CaskStore {
        var options = CaskStore.Options()
        options.createIfMissing = createIfMissing
        options.automaticCompaction = automaticCompaction
        options.encryption = encryption
        let store = try CaskError.wrap { () throws(CaskError) in try CaskStore.open(at: directory, options: options) }
        noteCuts(store.recoveryReport.truncations, in: directory, output: output)
        return store
    }

    /// Says on standard error, one line each, what an open of `directory` cut (its torn tails).
    static func noteCuts(_ truncations: [RecoveryReport.Truncation], in directory: String, output: Output) {
        for cut in truncations {
            output.error("note: opening \(directory) cut the torn tail of \(cut.file): \(cut.bytesRemoved) bytes at offset \(cut.offset) (\(cut.reason))\n")
        }
    }

    /// Whether the open of `store` skipped damage — anything but a torn tail, which a read-only
    /// open beside a live writer sees as an append in progress — and so whatever it reads may miss
    /// records, or show an older value of a key whose newer record is damaged. Says so on standard
    /// error, naming what to run. `list` and `export` then exit 65 after writing what they read;
    /// `get` keeps its own key's exit status. A damaged compaction manifest is not counted: the open
    /// then reads the compaction's inputs and outputs alike, and they hold the same live records.
    static func warnOfSkippedDamage(_ store: CaskStore, in directory: String, output: Output) -> Bool {
        let skipped = skippedDamage(store)
        guard skipped > 0 else { return false }
        output.error("warning: opening \(directory) skipped \(ranges(skipped)): records in them are missing here, and a key whose newest record is damaged shows an older value; 'cask verify \(directory)' lists them, 'cask recover \(directory)' repairs the store\n")
        return true
    }

    /// The damaged ranges the open of `store` skipped, as ``warnOfSkippedDamage(_:in:output:)`` counts them.
    static func skippedDamage(_ store: CaskStore) -> Int {
        store.recoveryReport.damagedRanges.filter { $0.kind != .tornTail && $0.kind != .compactionManifest }.count
    }

    /// `1 damaged range`, `3 damaged ranges`.
    static func ranges(_ count: Int) -> String {
        count == 1 ? "1 damaged range" : "\(count) damaged ranges"
    }

    /// Closes `store` (flushing and syncing a writable one), reporting a failure to do so.
    static func close(_ store: CaskStore) throws(ToolError) {
        try CaskError.wrap { () throws(CaskError) in try store.close() }
    }

    /// A key from the command line, checked against the store's limits before anything is opened.
    static func key(_ arguments: ParsedArguments) throws(ToolError) -> [UInt8] {
        let key = try arguments.key(arguments.argument(keyArgument.name), label: "<key>")
        if key.isEmpty { throw .usage(CaskError.emptyKey.description) }
        if key.count > Limits.maxKeyLength {
            throw .usage(CaskError.keyTooLong(length: key.count, limit: Limits.maxKeyLength).description)
        }
        return key
    }
}
