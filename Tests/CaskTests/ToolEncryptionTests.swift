import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest
@testable import Cask
import CaskTestSupport

/// The tool on encrypted stores, run as the built binary (through
/// ``ToolTests/cask(_:stdin:file:line:)``): every command with the store's key, without it, with
/// another key and with a key file that holds no key; `keygen`; `rekey` in every direction; `stat`,
/// `backup --verify` and `recover` of an encrypted store.
final class ToolEncryptionTests: XCTestCase {
    func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> ToolTests.Run {
        try ToolTests.cask(arguments, stdin: stdin, file: file, line: line)
    }

    /// 2100-01-01T00:00:00Z: far enough ahead that no test sees it pass.
    static let farFuture: UInt64 = 4_102_444_800_000

    // MARK: Fixtures

    /// Key files in a directory of their own (never inside a store): `key` (hex, as keygen writes
    /// it) and `other` (another key).
    private struct Keys {
        let root: TemporaryDirectory
        let key: EncryptionKey
        let other: EncryptionKey
        var keyFile: String { root.appending("key") }
        var otherFile: String { root.appending("other") }

        init() throws {
            root = TemporaryDirectory("cask-tool-keys")
            key = EncryptionKey.random()
            other = EncryptionKey.random()
            try Data(key.hexKeyFile.utf8).write(to: URL(fileURLWithPath: root.appending("key")))
            try Data(other.hexKeyFile.utf8).write(to: URL(fileURLWithPath: root.appending("other")))
        }

        /// A file in the keys' directory holding `bytes`.
        func file(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = root.appending(name)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Values no compression or cipher output contains by chance: each names itself.
    private static func value(_ key: String) -> [UInt8] { Array("plaintext value of \(key)".utf8) }

    /// A closed store at `path` (8 KiB segments) encrypted with `key` when given: `count` keys
    /// `key/<n>` with ``value(_:)``, every fifth with an expiry, some overwritten, one deleted.
    /// Returns what it holds.
    @discardableResult
    private func makeStore(
        _ path: String, key: EncryptionKey?, algorithm: EncryptionAlgorithm? = nil, count: Int = 40
    ) throws -> [[UInt8]: CaskStore.Entry] {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 8 << 10)
        if let key { options.encryption = .key(key, algorithm: algorithm) }
        let store = try CaskStore.open(at: path, options: options)
        var model: [[UInt8]: CaskStore.Entry] = [:]
        for round in 0..<2 {
            for n in 0..<count {
                let name = "key/\(n)"
                let value = round == 0 ? Array("first \(n)".utf8) : Self.value(name)
                if n % 5 == 0 {
                    try store.put(Array(name.utf8), value, expiresAtMilliseconds: Self.farFuture + UInt64(n))
                    model[Array(name.utf8)] = .init(key: Array(name.utf8), value: value, expiresAtMilliseconds: Self.farFuture + UInt64(n))
                } else {
                    try store.put(name, value)
                    model[Array(name.utf8)] = .init(key: Array(name.utf8), value: value)
                }
            }
        }
        try store.delete("key/1")
        model[Array("key/1".utf8)] = nil
        try store.close()
        return model
    }

    /// Every live key of the store at `path` with its value and expiry, read through the library.
    private func contents(of path: String, key: EncryptionKey?) throws -> [[UInt8]: CaskStore.Entry] {
        var options = CaskStore.Options.readOnly
        if let key { options.encryption = .key(key) }
        let store = try CaskStore.open(at: path, options: options)
        defer { try? store.close() }
        var entries: [[UInt8]: CaskStore.Entry] = [:]
        for name in try store.keys() { entries[name] = try XCTUnwrap(try store.entry(name)) }
        return entries
    }

    /// Every file of a store directory but `LOCK` (a writer's pid goes there).
    private func files(_ directory: String) throws -> [String: [UInt8]] {
        try StoreFiles.snapshot(directory).filter { $0.key != SegmentName.lockFile }
    }

    /// Whether any file of `directory` holds `text`'s bytes.
    private func holdsPlaintext(_ directory: String, _ text: String) throws -> Bool {
        let needle = Data(text.utf8)
        return try StoreFiles.snapshot(directory).values.contains { Data($0).range(of: needle) != nil }
    }

    private func json(_ run: ToolTests.Run, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any], run.out + run.err, file: file, line: line)
    }

    /// Standard error without the progress lines (`checking: 100% (…)`) that come before a failure.
    private func errors(_ run: ToolTests.Run) -> String {
        run.err.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { $0.range(of: #"^[a-z ]+: [0-9]+% \("#, options: .regularExpression) == nil }
            .joined(separator: "\n")
    }

    /// The tool's name for an algorithm: what `--algorithm` takes and JSON shows.
    private static func name(_ algorithm: EncryptionAlgorithm?) -> String? {
        switch algorithm {
        case .aes256gcm?: "aes256gcm"
        case .xchacha20poly1305?: "xchacha20poly1305"
        case nil: nil
        }
    }

    private func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    private static let plist = """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict><key>darkMode</key><true/><key>fontSize</key><integer>14</integer></dict></plist>

        """

    /// Every command that opens or reads the store at `dir`, each with what it needs beside it
    /// (files in `scratch`, which must exist), and the standard input it reads.
    private func everyCommand(_ dir: String, scratch: TemporaryDirectory) throws -> [([String], Data)] {
        let exportFile = scratch.appending("input.jsonl")
        try Data(#"{"key":"imported","value":"v"}"#.utf8 + [10]).write(to: URL(fileURLWithPath: exportFile))
        let plistFile = scratch.appending("defaults.plist")
        try Data(Self.plist.utf8).write(to: URL(fileURLWithPath: plistFile))
        return [
            (["get", dir, "key/2"], Data()),
            (["put", dir, "key/new"], Data("new".utf8)),
            (["delete", dir, "key/2"], Data()),
            (["list", dir], Data()),
            (["list", dir, "--json"], Data()),
            (["export", dir], Data()),
            (["export", dir, "--output", scratch.appending("export.jsonl")], Data()),
            (["import", dir, "--input", exportFile], Data()),
            (["import-defaults", dir, plistFile], Data()),
            (["stat", dir], Data()),
            (["stat", dir, "--json"], Data()),
            (["dump", dir], Data()),
            (["verify", dir], Data()),
            (["compact", dir], Data()),
            (["recover", dir], Data()),
            (["recover", dir, "--dry-run"], Data()),
            (["backup", dir, scratch.appending("backup")], Data()),
            (["backup", dir, scratch.appending("backup"), "--verify"], Data()),
        ]
    }

    /// Runs every command on `dir` with `extra` arguments and checks that each fails with
    /// `status` and exactly `message` on standard error, writes nothing to standard output, and
    /// leaves the store's files, and everything beside it, as they were.
    private func assertEveryCommandFails(
        _ dir: String, _ extra: [String], status: Int32, _ message: (_ command: [String]) -> String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let scratch = TemporaryDirectory("cask-tool-scratch")
        defer { scratch.remove() }
        let before = try files(dir)
        for (arguments, stdin) in try everyCommand(dir, scratch: scratch) {
            let beside = try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
            let run = try cask(arguments + extra, stdin: stdin, file: file, line: line)
            XCTAssertEqual(run.status, status, "\(arguments + extra): \(run.err)", file: file, line: line)
            XCTAssertEqual(errors(run), message(arguments), "\(arguments + extra)", file: file, line: line)
            XCTAssertEqual(run.out, "", "\(arguments + extra)", file: file, line: line)
            XCTAssertTrue(try files(dir) == before, "\(arguments + extra) changed the store", file: file, line: line)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted(), beside, "\(arguments + extra) left a file", file: file, line: line)
        }
    }

    // MARK: Help

    static let keygenHelp = """
        OVERVIEW: Write a new random encryption key to a new file.

        Writes 32 random bytes from the operating system's generator, as 64 hexadecimal
        digits and a newline, to <file>: a new file, mode 0600 (its owner reads and
        writes it, no one else), synced with its directory before the command exits 0.
        Prints nothing; on failure nothing is left at <file>.

        Never replaces anything: when <file> exists, or is a symbolic link (even one to
        nothing), the command refuses and exits 1, since a store encrypted with the key
        a file held cannot be read without it. It also refuses a <file> in a store's
        directory (one holding a segment or an ENCRYPTION file): whoever has a copy of
        the store would have its key.

        Give the file to --key-file: 'cask put <dir> <key> --key-file <file>' creates an
        encrypted store, 'cask rekey <dir> --new-key-file <file>' encrypts a store or
        changes its key. Keep the key away from the store (not in its directory) and
        back it up: whoever has it can read the store, and without it no one can.

        USAGE: cask keygen <file>

        ARGUMENTS:
          <file>                  The key file to create. It must not exist.

        OPTIONS:
          -h, --help              Show help information.

        """

    static let rekeyHelp = """
        OVERVIEW: Encrypt a store, change its key or algorithm, or decrypt it.

        --new-key-file encrypts a store that is not encrypted, or, with --key-file,
        changes the key of one that is; --algorithm chooses the algorithm (to change
        only the algorithm, give the same file to --key-file and --new-key-file).
        Without --algorithm an encrypted store keeps its algorithm, and a store being
        encrypted gets AES-256-GCM where the CPU runs it (AES-NI), XChaCha20-Poly1305
        elsewhere. --decrypt, with --key-file, stores the records unencrypted. A rekey
        that would change nothing (the same key, the same algorithm) is refused.

        Copies every key, with its value and expiry, into a new store beside the old one
        (<dir>.cask-rekey-<pid>-<n>), checks it, then swaps the two directories in one
        step and deletes the old store's files. Overwritten and deleted values are not
        copied, so nothing sealed with the old key stays in <dir>; a backup made before
        still opens with the old key. The new store has new sequence numbers and segment
        ids. Prints the keys copied, the segment bytes before and after, and the
        algorithm.

        A crash before the swap leaves the store as it was, and the new directory beside
        it; after the swap, the store is the new one, and the old one may be left under
        the .cask-rekey- name (readable with the old key) until the store's next open
        for writing deletes it. The parent directory must be writable and on the same
        file system. Takes the store's lock, so it refuses (exit 1) while another
        process has the store open for writing; a reader that has it open goes on
        reading the old store until it closes it. A store with damage is not rekeyed
        (exit 65): 'cask recover' it first. Shows progress on standard error.

        USAGE: cask rekey <dir> [--key-file <file>] [--new-key-file <file>]
                          [--algorithm <name>] [--decrypt] [--json]

        ARGUMENTS:
          <dir>                   The store directory.

        OPTIONS:
          --key-file <file>       The store's key now (a file of 64 hex digits or 32
                                  bytes); leave it out for a store that is not
                                  encrypted.
          --new-key-file <file>   Encrypt the store with the key in this file (as 'cask
                                  keygen' writes it).
          --algorithm <name>      With --new-key-file: encrypt with aes256gcm or
                                  xchacha20poly1305.
          --decrypt               Store the records unencrypted (needs --key-file).
          --json                  Print JSON instead of text (object keys sorted).
          -h, --help              Show help information.

        """

    func testHelpSnapshotsAndEveryStoreCommandTakesAKeyFile() throws {
        for (command, expected) in [("keygen", Self.keygenHelp), ("rekey", Self.rekeyHelp)] {
            for arguments in [[command, "--help"], ["help", command]] {
                let run = try cask(arguments)
                XCTAssertEqual(run.status, 0, "\(arguments)")
                XCTAssertEqual(run.out, expected, "\(arguments)")
            }
        }
        let keyFileHelp = "  --key-file <file>       The key of an encrypted store: a file of 64 hex digits\n"
        for command in ["get", "put", "delete", "list", "export", "import", "import-defaults", "stat", "dump", "verify", "recover", "compact", "backup"] {
            let run = try cask(["help", command])
            XCTAssertEqual(run.status, 0, command)
            XCTAssertTrue(run.out.contains("\n" + keyFileHelp), "\(command): \(run.out)")
            XCTAssertTrue(run.out.contains(" [--key-file <file>]\n"), "\(command): the usage names --key-file")
        }
        // Usage lines wrap like the rest: no line of any help is over 80 columns.
        for command in ["put", "get", "delete", "list", "stat", "verify", "dump", "compact", "recover", "backup", "export", "import", "import-defaults", "keygen", "rekey", "help"] {
            let run = try cask(["help", command])
            XCTAssertFalse(run.out.split(separator: "\n").contains { $0.count > 80 }, "\(command): a line over 80 columns")
        }
        XCTAssertEqual(try cask(["help", "list"]).out.components(separatedBy: "\n\n").first { $0.hasPrefix("USAGE:") }, """
            USAGE: cask list <dir> [--prefix <prefix>] [--escaped] [--json]
                             [--key-file <file>]
            """)
    }

    // MARK: Every command

    /// With the store's key every command does its job, and what `put`, `import` and
    /// `import-defaults` write (into an existing store or one they create) is sealed.
    func testEveryCommandWorksWithTheKey() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-encrypted")
        defer { root.remove(); keys.root.remove() }
        let dir = root.appending("store")
        var model = try makeStore(dir, key: keys.key)
        let key = ["--key-file", keys.keyFile]

        var run = try cask(["put", dir, "tool/put"] + key, stdin: Data("plaintext put by the tool".utf8))
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out + run.err, "")
        model[Array("tool/put".utf8)] = .init(key: Array("tool/put".utf8), value: Array("plaintext put by the tool".utf8))
        run = try cask(["get", dir, "tool/put"] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "plaintext put by the tool")
        run = try cask(["delete", dir, "key/3"] + key)
        XCTAssertEqual(run.status, 0, run.err)
        model[Array("key/3".utf8)] = nil
        XCTAssertEqual(try cask(["get", dir, "key/3"] + key).status, 1)
        XCTAssertEqual(try contents(of: dir, key: keys.key), model)
        XCTAssertFalse(try holdsPlaintext(dir, "plaintext"), "a value is on disk unencrypted")

        let names = model.keys.map { String(decoding: $0, as: UTF8.self) }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        run = try cask(["list", dir] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, names.map { $0 + "\n" }.joined())
        run = try cask(["list", dir, "--json", "--prefix", "tool/"] + key)
        XCTAssertEqual(try json(run)["keys"] as? [[String: String]], [["key": "tool/put"]])

        // export, then import into a new store with the key: the same entries, sealed.
        let export = try cask(["export", dir] + key)
        XCTAssertEqual(export.status, 0, export.err)
        XCTAssertEqual(export.out.split(separator: "\n").count, model.count)
        XCTAssertTrue(export.out.contains(#"{"expiresAtMilliseconds":\#(Self.farFuture + 5),"key":"key/5","value":"plaintext value of key/5"}"#), export.out)
        let copy = root.appending("copy")
        run = try cask(["import", copy, "--json"] + key, stdin: export.stdout)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try json(run)["entries"] as? Int, model.count)
        XCTAssertEqual(try contents(of: copy, key: keys.key), model)
        XCTAssertTrue(FileManager.default.fileExists(atPath: copy + "/" + EncryptionFile.fileName))
        XCTAssertFalse(try holdsPlaintext(copy, "plaintext"), "import wrote a value unencrypted")
        XCTAssertEqual(try cask(["export", copy] + key).out, export.out)
        run = try cask(["import", copy, "--key-file", keys.keyFile], stdin: Data(#"{"key":"again","value":"plaintext again"}"#.utf8))
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try cask(["get", copy, "again"] + key).out, "plaintext again")
        XCTAssertFalse(try holdsPlaintext(copy, "plaintext"))

        // import-defaults, into a store it creates and into the existing one.
        let plist = keys.root.appending("defaults.plist")
        try Data(Self.plist.utf8).write(to: URL(fileURLWithPath: plist))
        for target in [root.appending("defaults"), dir] {
            run = try cask(["import-defaults", target, plist, "--prefix", "defaults/"] + key)
            XCTAssertEqual(run.status, 0, run.err)
            var options = CaskStore.Options.readOnly
            options.encryption = .key(keys.key)
            let store = try CaskStore.open(at: target, options: options)
            XCTAssertEqual(try store.get(Int.self, forKey: "defaults/fontSize"), 14)
            XCTAssertEqual(try store.get(Bool.self, forKey: "defaults/darkMode"), true)
            XCTAssertEqual(store.encryptionAlgorithm, .preferred)
            try store.close()
        }

        run = try cask(["dump", dir] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains(" key=tool/put\n"), run.out)
        XCTAssertTrue(run.out.hasSuffix(" 0 damaged ranges\n"), run.out)
        run = try cask(["verify", dir] + key)
        XCTAssertEqual(run.status, 0, run.out)
        XCTAssertTrue(run.out.hasSuffix("\nNo damage found.\n"), run.out)
        run = try cask(["stat", dir, "--json"] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try json(run)["keys"] as? Int, model.count + 2)
        run = try cask(["compact", dir, "--json"] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertGreaterThan(try json(run)["recordsDropped"] as? Int ?? 0, 40, "the overwritten first round is dropped")
        run = try cask(["recover", dir] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.hasSuffix("\nNothing to repair.\n"), run.out)
        run = try cask(["backup", dir, root.appending("backup"), "--verify"] + key)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("verified: every record intact, opens clean"), run.out)

        // After all that, the store holds what it should, every file sealed.
        model[Array("defaults/darkMode".utf8)] = try XCTUnwrap(try contents(of: dir, key: keys.key)[Array("defaults/darkMode".utf8)])
        model[Array("defaults/fontSize".utf8)] = try XCTUnwrap(try contents(of: dir, key: keys.key)[Array("defaults/fontSize".utf8)])
        XCTAssertEqual(try contents(of: dir, key: keys.key), model)
        XCTAssertEqual(try contents(of: root.appending("backup"), key: keys.key), model)
        XCTAssertFalse(try holdsPlaintext(dir, "plaintext"))
        XCTAssertFalse(try holdsPlaintext(root.appending("backup"), "plaintext"))
    }

    /// Without --key-file every command refuses an encrypted store, exit 1, saying to give it.
    func testEveryCommandWithoutTheKeyExits1AndChangesNothing() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-encrypted")
        defer { root.remove(); keys.root.remove() }
        let dir = root.appending("store")
        try makeStore(dir, key: keys.key)
        try assertEveryCommandFails(dir, [], status: 1) { _ in
            "Error: \(dir) is encrypted; give the store's key with --key-file <file>\n"
        }
    }

    func testEveryCommandWithAnotherKeyExits1AndChangesNothing() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-encrypted")
        defer { root.remove(); keys.root.remove() }
        let dir = root.appending("store")
        try makeStore(dir, key: keys.key)
        try assertEveryCommandFails(dir, ["--key-file", keys.otherFile], status: 1) { _ in
            "Error: the key given is not the key store \(dir) was encrypted with (the key check in its ENCRYPTION file fails); nothing was read or written\n"
        }
        // A key of the right form for a store that is not encrypted.
        let plain = root.appending("plain")
        try makeStore(plain, key: nil)
        try assertEveryCommandFails(plain, ["--key-file", keys.keyFile], status: 1) { _ in
            "Error: store \(plain) is not encrypted and --key-file was given; leave --key-file out, or encrypt the store with 'cask rekey \(plain) --new-key-file <file>'\n"
        }
    }

    /// A key file that is missing, a symbolic link (to a good key file), a directory, or holds
    /// anything but a key: every command exits 1 naming the file, before it reads or writes
    /// anything; an empty path is a usage error.
    func testKeyFilesThatHoldNoKeyExit1BeforeAnythingIsOpened() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-encrypted")
        defer { root.remove(); keys.root.remove() }
        let dir = root.appending("store")
        try makeStore(dir, key: keys.key)

        let link = keys.root.appending("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: keys.keyFile)
        let missing = keys.root.appending("missing")
        try assertEveryCommandFails(dir, ["--key-file", link], status: 1) { _ in
            "Error: key file \(link) is a symbolic link; a key file is read only as a regular file, never through a link: name the file itself\n"
        }
        try assertEveryCommandFails(dir, ["--key-file", missing], status: 1) { _ in
            "Error: key file \(missing) does not exist; check the path ('cask keygen FILE' writes a new key, for a new store)\n"
        }
        try assertEveryCommandFails(dir, ["--key-file", keys.root.path], status: 1) { _ in
            "Error: key file \(keys.root.path) is not a regular file (a directory, FIFO, socket or device); name the key file itself\n"
        }
        let hex = Array(keys.key.hexKeyFile.utf8.dropLast())
        let malformed: [(String, [UInt8])] = [
            ("empty", []),
            ("short", [UInt8](repeating: 7, count: 31)),
            ("long", [UInt8](repeating: 7, count: 33)),
            ("hex-63", Array(hex.dropLast()) + [10]),
            ("hex-two-newlines", hex + [10, 10]),
            ("hex-not-hex", Array(hex.dropLast()) + Array("g\n".utf8)),
            ("hex-spaces", [32] + hex + [10]),
        ]
        for (name, bytes) in malformed {
            let path = try keys.file(name, bytes)
            try assertEveryCommandFails(dir, ["--key-file", path], status: 1) { _ in
                "Error: invalid encryption key: key file \(path) holds \(bytes.count) bytes; a key file holds the key's 32 bytes, or 64 hexadecimal digits and a newline; nothing was read or written\n"
            }
        }
        // A store that does not exist yet is not created with a key that is no key.
        for arguments in [["put", root.appending("new"), "k"], ["import", root.appending("new")]] {
            let run = try cask(arguments + ["--key-file", try keys.file("short", [7])], stdin: Data(#"{"key":"k","value":"v"}"#.utf8))
            XCTAssertEqual(run.status, 1, "\(arguments)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: root.appending("new")), "\(arguments) created the store")
        }
        let run = try cask(["get", dir, "key/2", "--key-file", ""])
        XCTAssertEqual(run.status, 64)
        XCTAssertEqual(run.err, "Error: --key-file must name a file\nUsage: cask get <dir> <key> [--escaped] [--key-file <file>]\n  See 'cask get --help' for more information.\n")

        // What a key file may hold: the 32 bytes, or the hex digits in either case, with or
        // without one newline (\n or \r\n).
        let upper = Array(String(decoding: hex, as: UTF8.self).uppercased().utf8)
        for (name, bytes) in [("raw", keys.key.storage.withBytes { Array($0) }), ("hex", hex), ("upper", upper + [10]), ("crlf", hex + [13, 10])] {
            let path = try keys.file(name, bytes)
            let get = try cask(["get", dir, "key/2", "--key-file", path])
            XCTAssertEqual(get.status, 0, "\(name): \(get.err)")
            XCTAssertEqual(get.out, "plaintext value of key/2", name)
        }
    }

    // MARK: keygen

    func testKeygenWritesANewKeyFileWithMode0600AndNeverReplacesAnything() throws {
        let dir = TemporaryDirectory("cask-tool-keygen")
        defer { dir.remove() }
        let first = dir.appending("first.key")
        // A umask that takes the owner's write bit away: keygen still leaves mode 0600.
        let umaskBefore = umask(0o277)
        let run = try cask(["keygen", first])
        umask(umaskBefore)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out + run.err, "")
        let text = try String(contentsOfFile: first, encoding: .utf8)
        XCTAssertNotNil(text.range(of: "^[0-9a-f]{64}\n$", options: .regularExpression), text)
        var info = stat()
        XCTAssertEqual(lstat(first, &info), 0)
        XCTAssertEqual(info.st_mode & 0o7777, 0o600)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFREG)
        let key = try EncryptionKey(keyFile: first)
        XCTAssertEqual(key.hexKeyFile, text)

        let second = dir.appending("second.key")
        XCTAssertEqual(try cask(["keygen", second]).status, 0)
        XCTAssertNotEqual(try EncryptionKey(keyFile: second), key, "two keys alike")

        // The key encrypts a store the tool creates with it.
        let store = dir.appending("store")
        XCTAssertEqual(try cask(["put", store, "k", "--key-file", first], stdin: Data("v".utf8)).status, 0)
        XCTAssertEqual(try contents(of: store, key: key), [Array("k".utf8): .init(key: Array("k".utf8), value: Array("v".utf8))])
        XCTAssertEqual(try cask(["get", store, "k", "--key-file", second]).status, 1)

        // Refused, exit 1, nothing changed: an existing file, a link to one, a link to nothing.
        let link = dir.appending("link.key"), dangling = dir.appending("dangling.key")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: first)
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: dir.appending("target.key"))
        for (path, message) in [
            (first, "Error: key file \(first) exists; keygen never replaces a file (a store encrypted with the key it holds would be lost): name a new file\n"),
            (link, "Error: key file \(link) is a symbolic link; keygen neither writes through a link nor replaces one: name a new file\n"),
            (dangling, "Error: key file \(dangling) is a symbolic link; keygen neither writes through a link nor replaces one: name a new file\n"),
            (dir.appending("missing/new.key"), "Error: cannot create key file \(dir.appending("missing/new.key")): No such file or directory\n"),
            (store + "/store.key", "Error: key file \(store)/store.key would be in a store's directory (it holds 0000000001.cask): whoever copies the store would have its key; name a file outside it\n"),
        ] {
            let refused = try cask(["keygen", path])
            XCTAssertEqual(refused.status, 1, path)
            XCTAssertEqual(refused.err, message)
            XCTAssertEqual(refused.out, "")
        }
        XCTAssertEqual(try String(contentsOfFile: first, encoding: .utf8), text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appending("target.key")))
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: link), first)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted(), ["dangling.key", "first.key", "link.key", "second.key", "store"])

        let usage = try cask(["keygen"])
        XCTAssertEqual(usage.status, 64)
        XCTAssertEqual(usage.err, "Error: missing argument <file>\nUsage: cask keygen <file>\n  See 'cask keygen --help' for more information.\n")
        XCTAssertEqual(try cask(["keygen", first, "--json"]).status, 64)
    }

    // MARK: rekey

    /// Encrypt, rotate the key (keeping the algorithm), change the algorithm, decrypt: after each,
    /// every key, value and expiry is there, the store verifies clean, the old key no longer opens
    /// it, and nothing is left beside it.
    func testRekeyInEveryDirectionKeepsEveryEntryAndExpiry() throws {
        let keys = try Keys()
        let parent = TemporaryDirectory("cask-tool-rekey")
        defer { parent.remove(); keys.root.remove() }
        let dir = parent.appending("store")
        let model = try makeStore(dir, key: nil, count: 300)
        let exported = try cask(["export", dir])
        XCTAssertEqual(exported.status, 0)
        XCTAssertEqual(exported.out.split(separator: "\n").count, model.count)

        func segmentBytes(_ key: String?) throws -> Int {
            let run = try cask(["stat", dir, "--json"] + (key.map { ["--key-file", $0] } ?? []))
            return try XCTUnwrap(try json(run)["segmentBytes"] as? Int, run.err)
        }
        func check(_ keyFile: String?, key: EncryptionKey?, algorithm: EncryptionAlgorithm?, _ step: String) throws {
            let withKey = keyFile.map { ["--key-file", $0] } ?? []
            XCTAssertEqual(try contents(of: dir, key: key), model, step)
            XCTAssertEqual(try cask(["export", dir] + withKey).out, exported.out, step)
            let verify = try cask(["verify", dir] + withKey)
            XCTAssertEqual(verify.status, 0, "\(step): \(verify.out)")
            XCTAssertTrue(verify.out.hasSuffix("\nNo damage found.\n"), "\(step): \(verify.out)")
            let stat = try json(try cask(["stat", dir, "--json"] + withKey))
            XCTAssertEqual(stat["encrypted"] as? Bool, algorithm != nil, step)
            XCTAssertEqual(stat["encryptionAlgorithm"] as? String, Self.name(algorithm), step)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"], step)
            XCTAssertEqual(try holdsPlaintext(dir, "plaintext value"), algorithm == nil, step)
        }

        // Encrypt: XChaCha20-Poly1305 as asked.
        var before = try segmentBytes(nil)
        var run = try cask(["rekey", dir, "--new-key-file", keys.keyFile, "--algorithm", "xchacha20poly1305"])
        XCTAssertEqual(run.status, 0, run.err)
        let after = try segmentBytes(keys.keyFile)
        XCTAssertEqual(run.out, "Rekeyed \(dir): encrypted with XChaCha20-Poly1305.\n\(model.count) keys copied; segment bytes \(before) -> \(after).\n")
        XCTAssertTrue(run.err.contains("rekeying: 100% (\(model.count) of \(model.count) keys, "), run.err)
        try check(keys.keyFile, key: keys.key, algorithm: .xchacha20poly1305, "encrypted")
        XCTAssertEqual(try cask(["list", dir]).status, 1)

        // A new key: the store keeps its algorithm.
        before = after
        run = try cask(["rekey", dir, "--key-file", keys.keyFile, "--new-key-file", keys.otherFile, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try json(run)
        XCTAssertEqual(report as NSDictionary, [
            "directory": dir, "keys": model.count, "segmentBytesBefore": before, "segmentBytesAfter": try segmentBytes(keys.otherFile),
            "encryptedBefore": true, "algorithmBefore": "xchacha20poly1305", "encrypted": true, "algorithm": "xchacha20poly1305",
            "keyChanged": true,
        ] as NSDictionary)
        try check(keys.otherFile, key: keys.other, algorithm: .xchacha20poly1305, "new key")
        let old = try cask(["list", dir, "--key-file", keys.keyFile])
        XCTAssertEqual(old.status, 1)
        XCTAssertEqual(old.err, "Error: the key given is not the key store \(dir) was encrypted with (the key check in its ENCRYPTION file fails); nothing was read or written\n")

        // The same key, another algorithm.
        var last = EncryptionAlgorithm.xchacha20poly1305
        if EncryptionAlgorithm.aes256gcm.isAvailable {
            run = try cask(["rekey", dir, "--key-file", keys.otherFile, "--new-key-file", keys.otherFile, "--algorithm", "aes256gcm"])
            XCTAssertEqual(run.status, 0, run.err)
            XCTAssertTrue(run.out.hasPrefix("Rekeyed \(dir): same key, XChaCha20-Poly1305 -> AES-256-GCM.\n\(model.count) keys copied; "), run.out)
            try check(keys.otherFile, key: keys.other, algorithm: .aes256gcm, "another algorithm")
            last = .aes256gcm
        }

        // Decrypt.
        before = try segmentBytes(keys.otherFile)
        run = try cask(["rekey", dir, "--key-file", keys.otherFile, "--decrypt"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "Rekeyed \(dir): decrypted (it was encrypted with \(last)).\n\(model.count) keys copied; segment bytes \(before) -> \(try segmentBytes(nil)).\n")
        try check(nil, key: nil, algorithm: nil, "decrypted")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/" + EncryptionFile.fileName))
        XCTAssertEqual(try cask(["list", dir, "--key-file", keys.otherFile]).status, 1)

        // Encrypt again without --algorithm: the preferred one.
        run = try cask(["rekey", dir, "--new-key-file", keys.keyFile])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.hasPrefix("Rekeyed \(dir): encrypted with \(EncryptionAlgorithm.preferred).\n"), run.out)
        try check(keys.keyFile, key: keys.key, algorithm: .preferred, "encrypted again")
    }

    /// What rekey refuses before touching the store (exit 64), and what it cannot do (exit 1):
    /// nothing changes either way.
    func testRekeyRefusesContradictionsAndKeysThatDoNotFit() throws {
        let keys = try Keys()
        let parent = TemporaryDirectory("cask-tool-rekey")
        defer { parent.remove(); keys.root.remove() }
        let dir = parent.appending("store"), plain = parent.appending("plain")
        try makeStore(dir, key: keys.key, algorithm: .xchacha20poly1305)
        try makeStore(plain, key: nil)
        let usage = "Usage: cask rekey <dir> [--key-file <file>] [--new-key-file <file>] [--algorithm <name>] [--decrypt] [--json]\n  See 'cask rekey --help' for more information.\n"
        let cases: [([String], Int32, String)] = [
            ([dir], 64, "say what to do: --new-key-file <file> to encrypt the store or change its key, or --decrypt (with --key-file) to decrypt it\n" + usage),
            ([dir, "--key-file", keys.keyFile], 64, "say what to do: --new-key-file <file> to encrypt the store or change its key, or --decrypt (with --key-file) to decrypt it\n" + usage),
            ([dir, "--key-file", keys.keyFile, "--new-key-file", keys.otherFile, "--decrypt"], 64,
             "--decrypt and --new-key-file contradict each other: give --new-key-file to encrypt with that key, or --decrypt to store the records unencrypted\n" + usage),
            ([dir, "--decrypt"], 64, "--decrypt needs the store's key: give --key-file <file>\n" + usage),
            ([dir, "--key-file", keys.keyFile, "--decrypt", "--algorithm", "aes256gcm"], 64,
             "--algorithm chooses how to encrypt, and --decrypt leaves the store unencrypted: give one of them\n" + usage),
            ([dir, "--key-file", keys.keyFile, "--new-key-file", keys.otherFile, "--algorithm", "rot13"], 64,
             "--algorithm must be aes256gcm or xchacha20poly1305, not 'rot13'\n" + usage),
            ([dir, "--key-file", keys.keyFile, "--new-key-file", keys.keyFile], 64,
             "--new-key-file holds the key --key-file holds, so nothing would change: give a new key, or --algorithm to change the algorithm\n" + usage),
            ([dir, "--key-file", keys.keyFile, "--new-key-file", try keys.file("copy", Array(keys.key.hexKeyFile.utf8)), "--algorithm", "xchacha20poly1305"], 64,
             "the store is already encrypted with XChaCha20-Poly1305 under the key --new-key-file holds, so nothing would change\n" + usage),
            ([dir, "--key-file", keys.keyFile, "--new-key-file", ""], 64, "--new-key-file must name a file\n" + usage),
            // Keys that do not fit the store.
            ([dir, "--new-key-file", keys.otherFile], 1, "\(dir) is encrypted; give the store's key with --key-file <file>\n"),
            ([dir, "--key-file", keys.otherFile, "--new-key-file", keys.keyFile], 1,
             "the key given is not the key store \(dir) was encrypted with (the key check in its ENCRYPTION file fails); nothing was read or written\n"),
            ([dir, "--key-file", keys.keyFile, "--new-key-file", keys.root.appending("missing")], 1,
             "key file \(keys.root.appending("missing")) does not exist; check the path ('cask keygen FILE' writes a new key, for a new store)\n"),
            ([plain, "--key-file", keys.keyFile, "--decrypt"], 1,
             "store \(plain) is not encrypted and --key-file was given; leave --key-file out, or encrypt the store with 'cask rekey \(plain) --new-key-file <file>'\n"),
            ([parent.appending("nothing"), "--new-key-file", keys.keyFile], 1,
             "store directory \(parent.appending("nothing")) does not exist; check the path (put, import and import-defaults create a store where there is none)\n"),
        ]
        let before = try files(dir), plainBefore = try files(plain)
        for (arguments, status, message) in cases {
            let run = try cask(["rekey"] + arguments)
            XCTAssertEqual(run.status, status, "\(arguments): \(run.err)")
            XCTAssertEqual(run.err, "Error: " + message, "\(arguments)")
            XCTAssertEqual(run.out, "", "\(arguments)")
        }
        XCTAssertTrue(try files(dir) == before, "the store changed")
        XCTAssertTrue(try files(plain) == plainBefore, "the plain store changed")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path).sorted(), ["plain", "store"])

        // Beside a writer that holds the lock.
        let writer = try CaskStore.open(at: plain, options: .manualCompaction())
        let locked = try cask(["rekey", plain, "--new-key-file", keys.keyFile])
        try writer.close()
        XCTAssertEqual(locked.status, 1)
        XCTAssertEqual(locked.err, "Error: \(CaskError.locked(path: resolved(plain), holderPID: getpid()))\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path).sorted(), ["plain", "store"])
    }

    /// Files in the store directory that are not Cask's stay in the old store's directory, which
    /// the report names.
    func testRekeyReportsTheDirectoryItLeftBehind() throws {
        let keys = try Keys()
        let parent = TemporaryDirectory("cask-tool-rekey")
        defer { parent.remove(); keys.root.remove() }
        let dir = parent.appending("store")
        let model = try makeStore(dir, key: nil)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: dir + "/notes.txt"))
        let run = try cask(["rekey", dir, "--new-key-file", keys.keyFile, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let leftBehind = try XCTUnwrap(try json(run)["leftBehind"] as? String)
        XCTAssertTrue(leftBehind.hasPrefix(resolved(dir) + ".cask-rekey-"), leftBehind)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: leftBehind), ["notes.txt"])
        XCTAssertEqual(try contents(of: dir, key: keys.key), model)
        try FileManager.default.removeItem(atPath: leftBehind)

        try Data("mine".utf8).write(to: URL(fileURLWithPath: dir + "/notes.txt"))
        let text = try cask(["rekey", dir, "--key-file", keys.keyFile, "--new-key-file", keys.otherFile])
        XCTAssertEqual(text.status, 0, text.err)
        let lines = text.out.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, text.out)
        XCTAssertTrue(lines.last?.hasPrefix("Left behind: \(resolved(dir)).cask-rekey-") == true, text.out)
        XCTAssertTrue(lines.last?.hasSuffix(", the old store's directory: it holds files that are not Cask's (they were in \(dir)); move what you need out of it, then delete it.") == true, text.out)
    }

    /// A store whose open skips damage is not rekeyed (the copy would hold an older value of a key
    /// whose newest record is damaged, and the damaged bytes would go); damage the open cannot see
    /// (behind a valid hint file) stops the copy. Either way: exit 65, nothing changed, nothing left.
    func testRekeyRefusesADamagedStore() throws {
        let keys = try Keys()
        let parent = TemporaryDirectory("cask-tool-rekey")
        defer { parent.remove(); keys.root.remove() }
        let dir = parent.appending("store")
        let model = try makeStore(dir, key: nil)
        let dump = try cask(["dump", dir, "--json"])
        let records = try dump.stdout.split(separator: UInt8(ascii: "\n")).compactMap { line -> [String: Any]? in
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            return object["kind"] as? String == "record" ? object : nil
        }
        // key/2's live value, behind the segment's valid hint file: the open does not read it.
        let live = try XCTUnwrap(records.last { $0["key"] as? String == "key/2" })
        let id = UInt64(try XCTUnwrap(live["segment"] as? Int))
        let segment = dir + "/" + SegmentName.segment(id)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        let offset = try XCTUnwrap(live["offset"] as? Int), length = try XCTUnwrap(live["bytes"] as? Int)
        bytes[offset + length - 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        var before = try files(dir)
        var run = try cask(["rekey", dir, "--new-key-file", keys.keyFile])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertTrue(errors(run).hasPrefix("Error: corrupt record in \(resolved(dir))/\(SegmentName.segment(id)) at offset \(offset): "), run.err)
        XCTAssertEqual(run.out, "")
        XCTAssertTrue(try files(dir) == before, "the store changed")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])

        // Without the hint file the open finds the damage and skips it: refused before the copy.
        try FileManager.default.removeItem(atPath: dir + "/" + SegmentName.hint(id))
        before = try files(dir)
        run = try cask(["rekey", dir, "--new-key-file", keys.keyFile])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertEqual(run.err, "Error: opening \(dir) skipped 1 damaged range: a rekey would copy an older value of a key whose newest record is damaged, and delete the damaged bytes; run 'cask recover \(dir)' first (nothing was changed)\n")
        XCTAssertTrue(try files(dir) == before, "the store changed")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: parent.path), ["store"])

        // Recovered, it is rekeyed: key/2's damaged value is lost, and (as recover reports) its
        // first value shows again; that is what the rekeyed store holds.
        XCTAssertEqual(try cask(["recover", dir, "--backup", parent.appending("backup")]).status, 0)
        let recovered = try contents(of: dir, key: nil)
        var expected = model
        expected[Array("key/2".utf8)] = .init(key: Array("key/2".utf8), value: Array("first 2".utf8))
        XCTAssertEqual(recovered, expected)
        run = try cask(["rekey", dir, "--new-key-file", keys.keyFile])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try contents(of: dir, key: keys.key), recovered)
    }

    // MARK: stat, backup, recover

    func testStatShowsTheAlgorithm() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-stat")
        defer { root.remove(); keys.root.remove() }
        var stores: [(String, EncryptionAlgorithm?)] = [(root.appending("plain"), nil), (root.appending("xchacha"), .xchacha20poly1305)]
        if EncryptionAlgorithm.aes256gcm.isAvailable { stores.append((root.appending("aes"), .aes256gcm)) }
        for (path, algorithm) in stores {
            try makeStore(path, key: algorithm == nil ? nil : keys.key, algorithm: algorithm)
            let key = algorithm == nil ? [] : ["--key-file", keys.keyFile]
            let text = try cask(["stat", path] + key)
            XCTAssertEqual(text.status, 0, text.err)
            XCTAssertTrue(text.out.hasPrefix("store: \(path)\nencryption: \(algorithm?.description ?? "none")\nkeys: "), text.out)
            let report = try json(try cask(["stat", path, "--json"] + key))
            XCTAssertEqual(report["encrypted"] as? Bool, algorithm != nil)
            XCTAssertEqual(report["encryptionAlgorithm"] as? String, Self.name(algorithm))
            XCTAssertEqual(report.keys.contains("encryptionAlgorithm"), algorithm != nil)
            XCTAssertEqual(report["keys"] as? Int, 39)
        }
    }

    /// `backup --verify` of an encrypted store beside the process writing it: the copy is sealed
    /// with the same key, and --verify reads it with that key.
    func testBackupVerifyOfAnEncryptedStoreBesideAWriter() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-backup")
        defer { root.remove(); keys.root.remove() }
        let dir = root.appending("store")
        var model = try makeStore(dir, key: keys.key, algorithm: .xchacha20poly1305, count: 200)
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 8 << 10)
        options.encryption = .key(keys.key)
        let writer = try CaskStore.open(at: dir, options: options)
        for n in 0..<30 {
            try writer.put("late/\(n)", Self.value("late/\(n)"))
            model[Array("late/\(n)".utf8)] = .init(key: Array("late/\(n)".utf8), value: Self.value("late/\(n)"))
        }

        let backup = root.appending("backup")
        var run = try cask(["backup", dir, backup, "--verify", "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("\(model.count) keys"), run.out)
        XCTAssertTrue(run.out.contains("verified: every record intact, opens clean"), run.out)
        run = try cask(["backup", dir, root.appending("backup-2"), "--copy", "--verify", "--json", "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try json(run)["verificationProblems"] as? [String], [])
        try writer.close()

        for copy in [backup, root.appending("backup-2")] {
            XCTAssertEqual(try contents(of: copy, key: keys.key), model)
            XCTAssertFalse(try holdsPlaintext(copy, "plaintext"))
            XCTAssertEqual(try json(try cask(["stat", copy, "--json", "--key-file", keys.keyFile]))["encryptionAlgorithm"] as? String, "xchacha20poly1305")
            let verify = try cask(["verify", copy, "--key-file", keys.keyFile])
            XCTAssertEqual(verify.status, 0, verify.out)
            XCTAssertEqual(try cask(["list", copy]).err, "Error: \(copy) is encrypted; give the store's key with --key-file <file>\n")
            XCTAssertEqual(try cask(["list", copy, "--key-file", keys.otherFile]).status, 1)
        }
    }

    /// A damaged record in a sealed segment of an encrypted store: verify names it, recover
    /// without the key refuses, the dry run changes nothing, and recover with the key keeps every
    /// other record (sealed again) and backs up the damaged segment.
    func testRecoverOfAnEncryptedStoreWithADamagedRecord() throws {
        let keys = try Keys()
        let root = TemporaryDirectory("cask-tool-recover")
        defer { root.remove(); keys.root.remove() }
        let dir = root.appending("store")
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: 4 << 10)
        options.encryption = .key(keys.key)
        let store = try CaskStore.open(at: dir, options: options)
        var model: [[UInt8]: CaskStore.Entry] = [:]
        for n in 0..<120 {
            let name = "key/\(n)"
            try store.put(Array(name.utf8), Self.value(name), expiresAtMilliseconds: Self.farFuture)
            model[Array(name.utf8)] = .init(key: Array(name.utf8), value: Self.value(name), expiresAtMilliseconds: Self.farFuture)
        }
        try store.close()

        // The fourth record of segment 1, as dump shows it (decrypted, with its key).
        let dump = try cask(["dump", dir, "--segment", "1", "--json", "--key-file", keys.keyFile])
        XCTAssertEqual(dump.status, 0, dump.err)
        let records = try dump.stdout.split(separator: UInt8(ascii: "\n")).compactMap { line -> [String: Any]? in
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            return object["kind"] as? String == "record" ? object : nil
        }
        XCTAssertGreaterThan(records.count, 6, "segment 1 holds too few records")
        let victim = records[3]
        let name = try XCTUnwrap(victim["key"] as? String)
        let offset = try XCTUnwrap(victim["offset"] as? Int), length = try XCTUnwrap(victim["bytes"] as? Int)
        let segment = dir + "/" + SegmentName.segment(1)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        let original = bytes
        bytes[offset + length / 2] ^= 0x20
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        let damaged = try files(dir)

        var run = try cask(["verify", dir, "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 65, run.out)
        XCTAssertTrue(run.out.contains("corrupt: \(segment) bytes \(offset)..<\(offset + length) (\(length) bytes, record): "), run.out)
        run = try cask(["get", dir, name, "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 65)
        XCTAssertTrue(run.err.hasPrefix("Error: corrupt record in \(segment) at offset \(offset): "), run.err)

        run = try cask(["recover", dir])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: \(dir) is encrypted; give the store's key with --key-file <file>\n")
        run = try cask(["recover", dir, "--dry-run", "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertTrue(run.out.contains("lost: put of key '\(name)'"), run.out)
        XCTAssertTrue(try files(dir) == damaged, "a refused or dry-run recover changed the store")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root.path), ["store"])

        run = try cask(["recover", dir, "--json", "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try json(run)
        XCTAssertEqual(report["verifiedClean"] as? Bool, true)
        XCTAssertEqual((report["lostRecords"] as? [[String: Any]])?.map { $0["key"] as? String }, [name])
        let changes = try XCTUnwrap(report["changes"] as? [[String: Any]])
        XCTAssertTrue(changes.contains { $0["kind"] as? String == "rewrite" && $0["file"] as? String == segment }, "\(changes)")
        let backup = try XCTUnwrap(report["backupDirectory"] as? String)
        XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: backup + "/" + SegmentName.segment(1)))), bytes)
        XCTAssertNotEqual(bytes, original)

        model[Array(name.utf8)] = nil
        run = try cask(["verify", dir, "--key-file", keys.keyFile])
        XCTAssertEqual(run.status, 0, run.out)
        XCTAssertEqual(try contents(of: dir, key: keys.key), model)
        XCTAssertFalse(try holdsPlaintext(dir, "plaintext"), "the rewritten segment holds a value unencrypted")
        XCTAssertEqual(try cask(["list", dir]).status, 1)
    }
}
