import Cask

/// `cask rekey <dir> [--key-file <file>] [--new-key-file <file>] [--algorithm <name>] [--decrypt] [--json]`
struct RekeyCommand: Subcommand {
    static let help = CommandHelp(
        name: "rekey",
        abstract: "Encrypt a store, change its key or algorithm, or decrypt it.",
        discussion: [
            "--new-key-file encrypts a store that is not encrypted, or, with --key-file, changes the key of one that is; --algorithm chooses the algorithm (to change only the algorithm, give the same file to --key-file and --new-key-file). Without --algorithm an encrypted store keeps its algorithm, and a store being encrypted gets AES-256-GCM where the CPU runs it (AES-NI), XChaCha20-Poly1305 elsewhere. --decrypt, with --key-file, stores the records unencrypted. A rekey that would change nothing (the same key, the same algorithm) is refused.",
            "Copies every key, with its value and expiry, into a new store beside the old one (<dir>.cask-rekey-<pid>-<n>), checks it, then swaps the two directories in one step and deletes the old store's files. Overwritten and deleted values are not copied, so nothing sealed with the old key stays in <dir>; a backup made before still opens with the old key. The new store has new sequence numbers and segment ids. Prints the keys copied, the segment bytes before and after, and the algorithm.",
            "A crash before the swap leaves the store as it was, and the new directory beside it; after the swap, the store is the new one, and the old one may be left under the .cask-rekey- name (readable with the old key) until the store's next open for writing deletes it. The parent directory must be writable and on the same file system. Takes the store's lock, so it refuses (exit 1) while another process has the store open for writing; a reader that has it open goes on reading the old store until it closes it. A store with damage is not rekeyed (exit 65): 'cask recover' it first. Shows progress on standard error.",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [
            .init(name: "key-file", valueName: "file", help: "The store's key now (a file of 64 hex digits or 32 bytes); leave it out for a store that is not encrypted."),
            .init(name: "new-key-file", valueName: "file", help: "Encrypt the store with the key in this file (as 'cask keygen' writes it)."),
            .init(name: "algorithm", valueName: "name", help: "With --new-key-file: encrypt with \(EncryptionAlgorithm.names)."),
            .init(name: "decrypt", valueName: nil, help: "Store the records unencrypted (needs --key-file)."),
            StoreAccess.jsonFlag,
        ])

    let directory: String
    /// The store's key now; nil: it is not encrypted.
    let oldKey: EncryptionKey?
    /// The key to encrypt with; nil: decrypt.
    let newKey: EncryptionKey?
    /// The algorithm asked for; nil: the store's own, or the preferred one for a store being encrypted.
    let algorithm: EncryptionAlgorithm?
    let json: Bool

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        json = arguments.flag("json")
        let decrypt = arguments.flag("decrypt")
        let oldPath = try KeyFile.path(arguments, option: "key-file")
        let newPath = try KeyFile.path(arguments, option: "new-key-file")
        if decrypt && newPath != nil {
            throw .usage("--decrypt and --new-key-file contradict each other: give --new-key-file to encrypt with that key, or --decrypt to store the records unencrypted")
        }
        if !decrypt && newPath == nil {
            throw .usage("say what to do: --new-key-file <file> to encrypt the store or change its key, or --decrypt (with --key-file) to decrypt it")
        }
        if decrypt && oldPath == nil {
            throw .usage("--decrypt needs the store's key: give --key-file <file>")
        }
        if let bytes = arguments.option("algorithm") {
            if decrypt { throw .usage("--algorithm chooses how to encrypt, and --decrypt leaves the store unencrypted: give one of them") }
            guard let algorithm = EncryptionAlgorithm(name: String(decoding: bytes, as: UTF8.self)) else {
                throw .usage("--algorithm must be \(EncryptionAlgorithm.names), not '\(KeyEscaping.escape(bytes))'")
            }
            self.algorithm = algorithm
        } else {
            algorithm = nil
        }
        oldKey = try oldPath.map { (path) throws(ToolError) in try KeyFile.key(at: path) }
        newKey = try newPath.map { (path) throws(ToolError) in try KeyFile.key(at: path) }
        if let oldKey, let newKey, oldKey == newKey, algorithm == nil {
            throw .usage("--new-key-file holds the key --key-file holds, so nothing would change: give a new key, or --algorithm to change the algorithm")
        }
    }

    struct Report: Encodable {
        var directory: String
        var keys: Int
        var segmentBytesBefore: Int64
        var segmentBytesAfter: Int64
        var encryptedBefore: Bool
        /// aes256gcm or xchacha20poly1305; absent: the store was not encrypted.
        var algorithmBefore: String?
        var encrypted: Bool
        /// Absent: the store is not encrypted now.
        var algorithm: String?
        /// Whether the store is now encrypted with another key than before (or was not encrypted).
        var keyChanged: Bool
        /// The old store's directory, when it held files that are not Cask's and so was not removed.
        var leftBehind: String?
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        // Opened first, read-only: a key that does not open the store (or one given for a store
        // that is not encrypted) fails here; an encrypted store keeps its algorithm unless asked;
        // and a store whose open skips damage is not rekeyed, since the copy would hold an older
        // value of a key whose newest record is damaged, and the damaged bytes would be deleted.
        let store = try StoreAccess.openForReading(directory, encryption: oldKey.map { .key($0) } ?? .none)
        let before = store.encryptionAlgorithm
        let damaged = StoreAccess.skippedDamage(store)
        try StoreAccess.close(store)
        if damaged > 0 {
            let recover = "cask recover \(directory)" + (oldKey == nil ? "" : " --key-file <file>")
            throw .data("opening \(directory) skipped \(StoreAccess.ranges(damaged)): a rekey would copy an older value of a key whose newest record is damaged, and delete the damaged bytes; run '\(recover)' first (nothing was changed)")
        }
        let after = newKey == nil ? nil : algorithm ?? before ?? .preferred
        if let after, !after.isAvailable {
            throw .failure("cannot encrypt with \(after) on this machine: libsodium runs it only on CPUs with AES-NI; give --algorithm xchacha20poly1305")
        }
        if let oldKey, let newKey, oldKey == newKey, after == before {
            throw .usage("the store is already encrypted with \(after.map(\.description) ?? "-") under the key --new-key-file holds, so nothing would change")
        }
        let progress = ProgressReporter(label: "rekeying", output: output, unit: .items("keys"))
        let rekey = try CaskError.wrap { () throws(CaskError) in
            try CaskStore.rekey(
                at: directory, from: oldKey.map { .key($0) } ?? .none, to: newKey.map { .key($0, algorithm: after) } ?? .none
            ) { progress.update($0.done, of: $0.total) }
        }
        // The library reports its progress in steps of a million keys: the bar ends at the keys copied.
        progress.update(Int64(rekey.keys), of: Int64(rekey.keys))
        progress.finish()
        StoreAccess.noteCuts(rekey.truncations, in: directory, output: output)
        let report = Report(
            directory: directory, keys: rekey.keys, segmentBytesBefore: rekey.bytesBefore, segmentBytesAfter: rekey.bytesAfter,
            encryptedBefore: before != nil, algorithmBefore: before?.name, encrypted: rekey.algorithm != nil, algorithm: rekey.algorithm?.name,
            keyChanged: newKey != nil && newKey != oldKey, leftBehind: rekey.leftBehind)
        if json {
            try output.json(report)
        } else {
            output.line("Rekeyed \(directory): \(Self.change(from: before, to: rekey.algorithm, keyChanged: report.keyChanged)).")
            output.line("\(rekey.keys) \(rekey.keys == 1 ? "key" : "keys") copied; segment bytes \(rekey.bytesBefore) -> \(rekey.bytesAfter).")
            if let leftBehind = rekey.leftBehind {
                output.line("Left behind: \(leftBehind), the old store's directory: it holds files that are not Cask's (they were in \(directory)); move what you need out of it, then delete it.")
            }
        }
        return .success
    }

    /// `encrypted with AES-256-GCM`, `decrypted (it was encrypted with …)`, `new key, AES-256-GCM`,
    /// `new key, AES-256-GCM -> XChaCha20-Poly1305`, `same key, AES-256-GCM -> XChaCha20-Poly1305`.
    static func change(from before: EncryptionAlgorithm?, to after: EncryptionAlgorithm?, keyChanged: Bool) -> String {
        switch (before, after) {
        case (nil, let after?): "encrypted with \(after)"
        case (let before?, nil): "decrypted (it was encrypted with \(before))"
        case (let before?, let after?):
            (keyChanged ? "new key, " : "same key, ") + (before == after ? "\(after)" : "\(before) -> \(after)")
        case (nil, nil): "not encrypted"
        }
    }
}
