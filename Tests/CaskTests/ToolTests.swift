import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Runs the built `cask` binary and checks its output and exit status; also checks
/// `CaskStore.verify(at:)` in process on damage the tool cannot produce by itself.
final class ToolTests: XCTestCase {
    // MARK: Running the tool

    /// The `cask` executable built next to the test bundle (override with `CASK_TOOL`).
    static let toolPath: String = {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["CASK_TOOL"] { return path }
        var directories: [URL] = []
        // Linux: the .xctest is an executable in the products directory; macOS: a bundle there.
        for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
            directories.append(bundle.bundleURL.deletingLastPathComponent())
        }
        if let executable = Bundle.main.executableURL { directories.append(executable.deletingLastPathComponent()) }
        directories.append(Bundle.main.bundleURL)
        directories.append(URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent())
        if let first = CommandLine.arguments.first { directories.append(URL(fileURLWithPath: first).deletingLastPathComponent()) }
        for argument in CommandLine.arguments where argument.hasSuffix(".xctest") {
            directories.append(URL(fileURLWithPath: argument).deletingLastPathComponent())
        }
        for directory in directories {
            let candidate = directory.appendingPathComponent("cask").path
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
        }
        return "cask-binary-not-found (searched \(directories.map(\.path)))"
    }()

    struct Run {
        var status: Int32
        var stdout: Data
        var stderr: Data
        var out: String { String(decoding: stdout, as: UTF8.self) }
        var err: String { String(decoding: stderr, as: UTF8.self) }
    }

    private final class Collected: @unchecked Sendable {
        var stdout = Data()
    }

    /// Runs `cask arguments…` with `stdin` as standard input (empty when nil).
    func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        try Self.cask(arguments, stdin: stdin, file: file, line: line)
    }

    /// ``cask(_:stdin:file:line:)`` for the other suites that run the binary.
    static func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        guard FileManager.default.isExecutableFile(atPath: Self.toolPath) else {
            XCTFail("cannot find the cask binary: \(Self.toolPath)", file: file, line: line)
            throw CocoaError(.fileNoSuchFile)
        }
        _ = ignoreBrokenPipes
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.toolPath)
        process.arguments = arguments
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let collected = Collected()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            collected.stdout = output.fileHandleForReading.readDataToEndOfFile()
        }
        DispatchQueue.global().async(group: group) {
            // The tool may exit before it reads its input (a refused key file): the write then
            // fails with EPIPE, which is no failure of the test.
            try? input.fileHandleForWriting.write(contentsOf: stdin)
            try? input.fileHandleForWriting.close()
        }
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: collected.stdout, stderr: stderr)
    }

    /// Writing to a tool that exited without reading its input raised SIGPIPE, which ended the
    /// whole test process (ToolEncryptionTests, 1 run in the suite in a few): ignored, the write
    /// fails with EPIPE instead. Set once, before the first tool runs.
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// A closed store holding `keys` (each with its UTF-8 key as value).
    private func makeStore(_ keys: [String], options: CaskStore.Options = .init()) throws -> TemporaryDirectory {
        let dir = TemporaryDirectory("cask-tool")
        let store = try CaskStore.open(at: dir.path, options: options)
        for key in keys { try store.put(key, Array(key.utf8)) }
        try store.close()
        return dir
    }

    private func flipByte(in path: String, at offset: Int) throws {
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[offset] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// A command that exits without reading its standard input leaves the test running: 4 MiB
    /// (more than a pipe holds) offered to `get` of a store that does not exist.
    func testAToolThatExitsBeforeReadingItsInputEndsNoTest() throws {
        let root = TemporaryDirectory("cask-tool-pipe")
        defer { root.remove() }
        let run = try cask(["get", root.appending("missing"), "k"], stdin: Data(repeating: 0x61, count: 4 << 20))
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.err.hasPrefix("Error: "), run.err)
    }

    // MARK: Help

    static let rootHelp = """
        OVERVIEW: Operate and inspect a Cask store from the shell.

        A store is a directory of segment files. Commands that write (put, delete,
        compact, recover, import, import-defaults, rekey) take the store's lock and fail
        while another process has the store open for writing; commands that read (get,
        list, stat, verify, dump, export, backup) take no lock and work alongside a
        writer.

        An encrypted store is opened with its key: every command that opens a store
        takes --key-file <file> ('cask keygen' writes a key file).

        USAGE: cask <subcommand>

        OPTIONS:
          -h, --help              Show help information.

        SUBCOMMANDS:
          put                     Store standard input as the value of a key.
          get                     Write the value of a key to standard output.
          delete                  Delete a key.
          list                    List keys, one per line, sorted bytewise.
          stat                    Show key counts and space use, per store and segment.
          verify                  Check every record of every segment.
          dump                    List every record of every segment, in file order.
          compact                 Rewrite the store without its overwritten and deleted
                                  records.
          recover                 Repair a damaged store (backing up what it changes).
          backup                  Make a consistent copy of the store, while it is in
                                  use.
          export                  Write keys, values and expiries as JSON Lines.
          import                  Put the entries of a 'cask export' file into a store.
          import-defaults         Import the entries of a property-list file.
          keygen                  Write a new random encryption key to a new file.
          rekey                   Encrypt a store, change its key or algorithm, or
                                  decrypt it.
          help                    Show help for a subcommand.

          See 'cask help <subcommand>' for detailed help.

        EXIT STATUS:
          0                       Success.
          1                       Failure: a missing key, a store locked by another
                                  writer, an I/O error, or an encryption key the command
                                  cannot use (a key file missing, a link or holding no
                                  key; no --key-file for an encrypted store, or one for
                                  a store that is not; the wrong key).
          64                      Usage error: the command line is wrong.
          65                      Data error: the store holds damaged data ('verify'
                                  found damage, a read hit a damaged record, 'recover
                                  --dry-run' found something to repair), or the input is
                                  malformed ('import', 'import-defaults').

        """

    static let getHelp = #"""
        OVERVIEW: Write the value of a key to standard output.

        Writes the value's bytes exactly, with no newline added. Exits 1 when the key
        has no value, and 65 when its record is damaged (no damaged bytes are written).
        When opening skipped damaged records elsewhere, a warning goes to standard error
        (the key's newest record may be among them) and the exit status is the key's.
        Opens the store read-only and takes no lock, so it works while another process
        writes.

        USAGE: cask get <dir> <key> [--escaped] [--key-file <file>]

        ARGUMENTS:
          <dir>                   The store directory.
          <key>                   The key: the bytes of the argument as given (see
                                  --escaped). Put '--' before a key that starts with
                                  '-'.

        OPTIONS:
          --escaped               Read keys and prefixes with the escapes 'cask list'
                                  prints: \xHH for a byte, \\ for a backslash.
          --key-file <file>       The key of an encrypted store: a file of 64 hex digits
                                  (as 'cask keygen' writes) or 32 bytes. Needed for an
                                  encrypted store, refused for one that is not.
          -h, --help              Show help information.

        """#

    func testHelpSnapshots() throws {
        for arguments in [["help"], [], ["--help"], ["-h"]] {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 0, "\(arguments)")
            XCTAssertEqual(run.out, Self.rootHelp, "\(arguments)")
            XCTAssertEqual(run.err, "")
        }
        for arguments in [["get", "--help"], ["help", "get"], ["get", "-h"], ["get", "dir", "--help"]] {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 0, "\(arguments)")
            XCTAssertEqual(run.out, Self.getHelp, "\(arguments)")
        }
        for command in ["put", "get", "delete", "list", "stat", "verify", "help"] {
            let run = try cask([command, "--help"])
            XCTAssertEqual(run.status, 0, command)
            XCTAssertTrue(run.out.hasPrefix("OVERVIEW: "), command)
            XCTAssertTrue(run.out.contains("\n\nUSAGE: cask \(command) "), command)
            XCTAssertTrue(run.out.contains("\n\nARGUMENTS:\n  <"), command)
            XCTAssertTrue(run.out.contains("\n\nOPTIONS:\n"), command)
            XCTAssertTrue(run.out.hasSuffix("  -h, --help              Show help information.\n"), command)
            XCTAssertFalse(run.out.split(separator: "\n").contains { $0.count > 80 }, "\(command): a line over 80 columns")
        }
    }

    // MARK: Exit statuses

    func testUsageErrorsExit64WithUsage() throws {
        let dir = try makeStore(["a"])
        let cases: [([String], String, String)] = [
            (["frobnicate"], "Error: unknown subcommand 'frobnicate'\n", "Usage: cask <subcommand>\n"),
            (["--verbose"], "Error: unknown option '--verbose'\n", "Usage: cask <subcommand>\n"),
            (["get"], "Error: missing argument <dir>\n", "Usage: cask get <dir> <key> [--escaped] [--key-file <file>]\n"),
            (["get", dir.path], "Error: missing argument <key>\n", "Usage: cask get <dir> <key> [--escaped] [--key-file <file>]\n"),
            (["get", dir.path, "a", "b"], "Error: unexpected argument 'b'\n", "Usage: cask get <dir> <key> [--escaped] [--key-file <file>]\n"),
            (["list", dir.path, "--colour"], "Error: unknown option '--colour'\n", "Usage: cask list <dir> [--prefix <prefix>] [--escaped] [--json] [--key-file <file>]\n"),
            (["list", dir.path, "--prefix"], "Error: missing value for option '--prefix <prefix>'\n", "Usage: cask list"),
            (["list", dir.path, "--json=yes"], "Error: flag '--json' takes no value\n", "Usage: cask list"),
            (["get", dir.path, #"\q"#, "--escaped"], #"Error: <key> has an invalid escape at byte 0"#, "Usage: cask get"),
            (["put", dir.path, ""], "Error: key is empty; keys are 1 to 65535 bytes\n", "Usage: cask put"),
            (["help", "nothing"], "Error: unknown subcommand 'nothing'\n", "Usage: cask help [<subcommand>]\n"),
        ]
        for (arguments, error, usage) in cases {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 64, "\(arguments)")
            XCTAssertTrue(run.err.hasPrefix(error), "\(arguments): \(run.err)")
            XCTAssertTrue(run.err.contains("\n" + usage), "\(arguments): \(run.err)")
            XCTAssertEqual(run.out, "", "\(arguments)")
        }
    }

    func testMissingKeyAndMissingStoreExit1() throws {
        let dir = try makeStore(["present"])
        var run = try cask(["get", dir.path, "absent"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: key 'absent' has no value in \(dir.path)\n")
        XCTAssertEqual(run.out, "")
        run = try cask(["delete", dir.path, "absent"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: key 'absent' has no value in \(dir.path); nothing was deleted\n")
        run = try cask(["delete", dir.path, "present"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try cask(["get", dir.path, "present"]).status, 1)

        let missing = dir.appending("no-such-store")
        for arguments in [["get", missing, "k"], ["list", missing], ["stat", missing], ["delete", missing, "k"], ["verify", missing], ["dump", missing]] {
            run = try cask(arguments)
            XCTAssertEqual(run.status, 1, "\(arguments)")
            XCTAssertEqual(run.err, "Error: store directory \(missing) does not exist; check the path (put, import and import-defaults create a store where there is none)\n", "\(arguments)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: missing), "\(arguments) created the store")
        }
    }

    func testLockedStoreRefusesWritersNamingThePidAndServesReaders() throws {
        let dir = TemporaryDirectory("cask-tool")
        let store = try CaskStore.open(at: dir.path)
        defer { try? store.close() }
        try store.put("held", Array("by the test".utf8))
        let locked = "Error: \(CaskError.locked(path: dir.path, holderPID: getpid()))\n"
        XCTAssertTrue(locked.contains("(pid \(getpid()))"))

        var run = try cask(["put", dir.path, "k"], stdin: Data("v".utf8))
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, locked)
        run = try cask(["delete", dir.path, "held"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, locked)
        run = try cask(["compact", dir.path])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, locked)

        // Readers take no lock and see what the writer has written.
        run = try cask(["get", dir.path, "held"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "by the test")
        run = try cask(["list", dir.path])
        XCTAssertEqual(run.out, "held\n")
        XCTAssertEqual(try cask(["stat", dir.path, "--json"]).status, 0)
        run = try cask(["verify", dir.path])
        XCTAssertEqual(run.status, 0, run.out)
        XCTAssertEqual(try store.get("held"), Array("by the test".utf8))
    }

    // MARK: Commands

    func testCompactShrinksTheStoreAndReportsProgress() throws {
        let dir = TemporaryDirectory("cask-tool-compact")
        var options = CaskStore.Options()
        options.maxSegmentSize = 16 << 10
        options.automaticCompaction = false
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 3)
        for round in 0..<10 {
            for user in 0..<50 { try store.put("user/\(user)", Array("round \(round) ".utf8) + random.bytes(200)) }
        }
        let last = try store.get("user/7")
        try store.close()

        var run = try cask(["compact", dir.path, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        let before = try XCTUnwrap(report["diskBytesBefore"] as? Int), after = try XCTUnwrap(report["diskBytesAfter"] as? Int)
        XCTAssertLessThan(after * 3, before, "\(report)")
        XCTAssertEqual(report["keys"] as? Int, 50)
        XCTAssertEqual(report["deadBytes"] as? Int, 0)
        XCTAssertGreaterThan(report["segmentsCompacted"] as? Int ?? 0, 1)
        // Not a terminal: plain progress lines, ending at 100%.
        XCTAssertTrue(run.err.hasPrefix("compacting: 0%"), run.err)
        XCTAssertTrue(run.err.contains("compacting: 100%"), run.err)

        run = try cask(["get", dir.path, "user/7"])
        XCTAssertEqual(Array(run.stdout), last)
        run = try cask(["compact", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("compacted"), run.out)
        XCTAssertEqual(try cask(["verify", dir.path]).status, 0)
    }

    /// Damage behind a valid hint file (so the open cannot see it): `compact` compacts the rest,
    /// prints where the damage is, leaves that segment alone, and exits 65.
    func testCompactReportsDamageItFindsAndExits65() throws {
        let dir = TemporaryDirectory("cask-tool-compact-damage")
        var options = CaskStore.Options()
        options.maxSegmentSize = 4096
        options.automaticCompaction = false
        let store = try CaskStore.open(at: dir.path, options: options)
        var random = SeededGenerator(seed: 4)
        for round in 0..<3 {
            for user in 0..<20 { try store.put("user/\(user)", Array("round \(round) ".utf8) + random.bytes(200)) }
        }
        try store.close()
        let first = dir.appending(SegmentName.segment(1))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: first)))
        bytes[SegmentHeader.length + 20] ^= 0xFF  // inside the first record
        try Data(bytes).write(to: URL(fileURLWithPath: first))

        var run = try cask(["compact", dir.path, "--json"])
        XCTAssertEqual(run.status, 65, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        let damage = try XCTUnwrap(report["damage"] as? [[String: Any]])
        XCTAssertEqual(damage.map { $0["file"] as? String }, [first])
        XCTAssertEqual(damage.first?["offset"] as? Int, SegmentHeader.length)
        XCTAssertGreaterThan(report["segmentsCompacted"] as? Int ?? 0, 0)
        XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: first))), bytes)

        run = try cask(["compact", dir.path])
        XCTAssertEqual(run.status, 65, run.err)  // a new open: the hint still hides it, compaction finds it again
        XCTAssertTrue(run.out.contains("damaged, left as it is: \(first) bytes \(SegmentHeader.length)..<"), run.out)
        XCTAssertTrue(run.out.contains("run 'cask recover \(dir.path)'"), run.out)
    }

    func testPutGetRoundTripsBinaryValuesAndKeys() throws {
        let dir = TemporaryDirectory("cask-tool")
        var rng = SeededGenerator(seed: 7)
        let values: [[UInt8]] = [
            Array(0...255) + Array((0...255).reversed()),
            rng.bytes(200_000),  // several pipe buffers, incompressible
            [UInt8](repeating: 0, count: 100_000) + [10, 13, 0],  // compressible, trailing newline and NUL
            [],
        ]
        for (index, value) in values.enumerated() {
            let key = "value-\(index)"
            var run = try cask(["put", dir.path, key], stdin: Data(value))
            XCTAssertEqual(run.status, 0, run.err)
            XCTAssertEqual(run.out, "")
            run = try cask(["get", dir.path, key])
            XCTAssertEqual(run.status, 0, run.err)
            XCTAssertEqual([UInt8](run.stdout), value, key)
        }
        // A key that is not text: written with --escaped, listed in the same escaped form, read back.
        let escaped = #"\xff\x00bin\\key\x0a"#
        XCTAssertEqual(try cask(["put", dir.path, escaped, "--escaped"], stdin: Data([1, 2, 3])).status, 0)
        let store = try CaskStore.open(at: dir.path, options: .init(durability: .os, readOnly: true))
        XCTAssertEqual(try store.get([0xFF, 0x00] + Array(#"bin\key"#.utf8) + [0x0A]), [1, 2, 3])
        try store.close()
        let listed = try cask(["list", dir.path]).out.split(separator: "\n").map(String.init)
        XCTAssertEqual(listed, ["value-0", "value-1", "value-2", "value-3", escaped])
        var run = try cask(["get", "--escaped", dir.path, listed[4]])
        XCTAssertEqual([UInt8](run.stdout), [1, 2, 3])
        // A key starting with '-' goes after '--'.
        XCTAssertEqual(try cask(["put", dir.path, "--", "-dash"], stdin: Data("d".utf8)).status, 0)
        run = try cask(["get", dir.path, "--", "-dash"])
        XCTAssertEqual(run.out, "d")
    }

    func testListWithPrefixSortedAndJSON() throws {
        let dir = try makeStore(["user:2", "admin:1", "user:10", "user:1", "usr", "zeta", "tab\tkey"])
        var run = try cask(["list", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "admin:1\ntab\\x09key\nuser:1\nuser:10\nuser:2\nusr\nzeta\n")
        run = try cask(["list", dir.path, "--prefix", "user:"])
        XCTAssertEqual(run.out, "user:1\nuser:10\nuser:2\n")
        run = try cask(["list", "--prefix=us", dir.path])
        XCTAssertEqual(run.out, "user:1\nuser:10\nuser:2\nusr\n")
        run = try cask(["list", dir.path, "--prefix", "nothing"])
        XCTAssertEqual(run.status, 0)
        XCTAssertEqual(run.out, "")
        run = try cask(["list", dir.path, "--prefix", #"tab\x09"#, "--escaped", "--json"])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        XCTAssertEqual(object["count"] as? Int, 1)
        XCTAssertEqual(object["keys"] as? [[String: String]], [["key": "tab\tkey"]])
    }

    func testStatJSONCountsKeysAndSegments() throws {
        let dir = TemporaryDirectory("cask-tool")
        var options = CaskStore.Options()
        options.maxSegmentSize = 8 << 10
        let store = try CaskStore.open(at: dir.path, options: options)
        for i in 0..<300 { try store.put("key-\(i)", [UInt8](repeating: UInt8(i % 251), count: 40 + i % 50)) }
        for i in stride(from: 0, to: 300, by: 3) { try store.delete("key-\(i)") }
        for i in 0..<20 { try store.put("key-\(i + 1000)", Array("new".utf8)) }
        let expected = try store.statistics()
        try store.close()

        let run = try cask(["stat", dir.path, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        XCTAssertEqual(report["keys"] as? Int, 220)
        XCTAssertEqual(report["keys"] as? Int, expected.keys)
        XCTAssertEqual((report["liveBytes"] as? NSNumber)?.int64Value, expected.liveBytes)
        XCTAssertEqual((report["deadBytes"] as? NSNumber)?.int64Value, expected.deadBytes)
        XCTAssertEqual(report["damagedRanges"] as? Int, 0)
        let segments = try XCTUnwrap(report["segments"] as? [[String: Any]])
        XCTAssertGreaterThan(segments.count, 1)
        XCTAssertEqual(segments.count, expected.segments.count)
        XCTAssertEqual(segments.compactMap { $0["records"] as? Int }.reduce(0, +), 300 + 100 + 20)
        XCTAssertEqual(segments.compactMap { $0["liveRecords"] as? Int }.reduce(0, +), 220)
        XCTAssertEqual(segments.first?["file"] as? String, "0000000001.cask")
        let segmentBytes = segments.compactMap { ($0["bytes"] as? NSNumber)?.int64Value }.reduce(0, +)
        XCTAssertEqual((report["segmentBytes"] as? NSNumber)?.int64Value, segmentBytes)
        XCTAssertGreaterThan((report["diskBytes"] as? NSNumber)?.int64Value ?? 0, segmentBytes)  // plus hint files

        let text = try cask(["stat", dir.path])
        XCTAssertEqual(text.status, 0)
        XCTAssertTrue(text.out.split(separator: "\n").contains { $0.hasPrefix("keys: ") && $0.hasSuffix(" 220") }, text.out)
        XCTAssertTrue(text.out.contains("\nsegments:"), text.out)
        XCTAssertTrue(text.out.contains("  0000000001.cask  "), text.out)
    }

    // MARK: verify

    /// A closed store whose one segment holds `count` records of exactly 111 bytes each
    /// (keys `k0`…`k9`, 100 incompressible bytes, seq < 128), so record `i` starts at `40 + 111 * i`.
    private func makeFixedSizeStore(count: Int = 8) throws -> TemporaryDirectory {
        var rng = SeededGenerator(seed: 42)
        let dir = TemporaryDirectory("cask-tool")
        let store = try CaskStore.open(at: dir.path)
        for i in 0..<count { try store.put("k\(i)", rng.bytes(100)) }
        try store.close()
        return dir
    }

    /// Stray files — a store file's name gone wrong — are ignored and left alone, and every command
    /// that examines the directory names them (FORMAT.md, "The store directory"): verify, stat and
    /// recover, in text and JSON. They are no damage: verify still exits 0.
    func testStrayFilesAreNamedByVerifyStatAndRecover() throws {
        let dir = try makeStore(["a"])
        let strays = ["4.cask", "0000000000.cask", "0000000001.cask.bak", "9999999999.hint", "notes.dict.txt"]
        for name in strays { try Data("x".utf8).write(to: URL(fileURLWithPath: dir.appending(name))) }
        let lines = { (text: String, prefix: String) in
            text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)).components(separatedBy: ": ")[0] }
        }
        let expected = strays.map(dir.appending).sorted()

        let verify = try cask(["verify", dir.path])
        XCTAssertEqual(verify.status, 0, verify.err)
        XCTAssertEqual(lines(verify.out, "ignored: "), expected)
        XCTAssertTrue(verify.out.contains("ignored: \(dir.appending("4.cask")): not a segment name (ten digits, then .cask)\n"), verify.out)
        let verifyJSON = try XCTUnwrap(try JSONSerialization.jsonObject(with: try cask(["verify", dir.path, "--json"]).stdout) as? [String: Any])
        XCTAssertEqual((verifyJSON["ignoredFiles"] as? [String])?.map { $0.components(separatedBy: ": ")[0] }, expected)

        let stat = try cask(["stat", dir.path])
        XCTAssertEqual(stat.status, 0, stat.err)
        XCTAssertEqual(lines(stat.err, "note: ignored "), expected)
        let statJSON = try XCTUnwrap(try JSONSerialization.jsonObject(with: try cask(["stat", dir.path, "--json"]).stdout) as? [String: Any])
        XCTAssertEqual((statJSON["ignoredFiles"] as? [String])?.map { $0.components(separatedBy: ": ")[0] }, expected)

        let recover = try cask(["recover", dir.path, "--dry-run"])
        XCTAssertEqual(recover.status, 0, recover.err)
        XCTAssertEqual(lines(recover.out, "ignored: "), expected)
        XCTAssertTrue(recover.out.hasSuffix("Nothing to repair.\n"), recover.out)
        for name in strays { XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: dir.appending(name))), Data("x".utf8), name) }
    }

    func testVerifyCleanStoreExits0() throws {
        let dir = try makeFixedSizeStore()
        let run = try cask(["verify", dir.path])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        XCTAssertEqual(run.out, "Verified \(dir.path): 1 segment, 8 records, \(40 + 8 * 111) bytes.\nNo damage found.\n")
        let json = try cask(["verify", dir.path, "--json"])
        XCTAssertEqual(json.status, 0)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        XCTAssertEqual(report["clean"] as? Bool, true)
        XCTAssertEqual(report["records"] as? Int, 8)
        XCTAssertEqual((report["segments"] as? [[String: Any]])?.first?["hint"] as? String, "valid")
    }

    func testVerifyCorruptStoreExits65WithFileAndOffset() throws {
        let dir = try makeFixedSizeStore()
        let segment = dir.appending("0000000001.cask")
        try flipByte(in: segment, at: 40 + 111 * 3 + 60)  // inside the value of k3
        let run = try cask(["verify", dir.path])
        XCTAssertEqual(run.status, 65, run.out + run.err)
        XCTAssertTrue(run.out.contains("corrupt: \(segment) bytes 373..<484 (111 bytes, record): checksum mismatch"), run.out)
        XCTAssertTrue(run.out.contains("invalid hint: \(dir.appending("0000000001.hint")): it lists 1 record inside damaged ranges of the segment (the first at offset 373)"), run.out)
        XCTAssertTrue(run.out.hasSuffix("Damage found: 1 damaged range, 1 invalid hint file.\n"), run.out)

        let json = try cask(["verify", dir.path, "--json"])
        XCTAssertEqual(json.status, 65)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
        XCTAssertEqual(report["clean"] as? Bool, false)
        XCTAssertEqual(report["records"] as? Int, 7)
        let problems = try XCTUnwrap(report["problems"] as? [[String: Any]])
        XCTAssertEqual(problems.count, 1)
        XCTAssertEqual(problems.first?["file"] as? String, segment)
        XCTAssertEqual(problems.first?["offset"] as? Int, 373)
        XCTAssertEqual(problems.first?["length"] as? Int, 111)
        XCTAssertEqual(problems.first?["kind"] as? String, "record")

        // The damaged key is a data error; its neighbours still read.
        let get = try cask(["get", dir.path, "k3"])
        XCTAssertEqual(get.status, 65)
        XCTAssertEqual(get.out, "")
        XCTAssertTrue(get.err.hasPrefix("Error: corrupt record in \(segment) at offset 373: "), get.err)
        XCTAssertEqual(try cask(["get", dir.path, "k4"]).stdout.count, 100)
    }

    // MARK: The verifier in process

    func testVerifierReportsTornTailHeaderDamageAndOrphanHints() throws {
        let dir = try makeFixedSizeStore()
        let segment = dir.appending("0000000001.cask")
        try FileManager.default.removeItem(atPath: dir.appending("0000000001.hint"))
        try FileHandle(forWritingTo: URL(fileURLWithPath: segment)).truncate(atOffset: UInt64(40 + 111 * 7 + 50))
        try Data("stale".utf8).write(to: URL(fileURLWithPath: dir.appending("0000000009.hint")))
        var report = try CaskStore.verify(at: dir.path)
        XCTAssertEqual(report.recordsChecked, 7)
        XCTAssertEqual(report.damagedRanges, [.init(kind: .tornTail, file: segment, segmentID: 1, offset: 817, length: 50, reason: "record is cut short (needs 111 bytes)")])
        XCTAssertEqual(report.invalidHints.map(\.file), [dir.appending("0000000009.hint")])
        XCTAssertEqual(report.segments.map(\.hint), [.absent])

        try flipByte(in: segment, at: 20)  // the segment id, under the header checksum
        report = try CaskStore.verify(at: dir.path)
        XCTAssertEqual(report.damagedRanges.first, .init(kind: .segmentHeader, file: segment, segmentID: 1, offset: 0, length: 40, reason: "invalid segment header (header checksum mismatch)"))
        XCTAssertEqual(report.recordsChecked, 7, "records are still checked behind a bad header")
        XCTAssertFalse(report.isClean)
    }

    func testVerifierChecksHintsAgainstSegmentsAcrossRotation() throws {
        let dir = TemporaryDirectory("cask-tool")
        var options = CaskStore.Options()
        options.maxSegmentSize = 4096
        let store = try CaskStore.open(at: dir.path, options: options)
        var rng = SeededGenerator(seed: 3)
        for i in 0..<200 { try store.put("key-\(i)", rng.bytes(30 + i % 70)) }
        try store.close()
        var report = try CaskStore.verify(at: dir.path)
        XCTAssertTrue(report.isClean, "\(report)")
        XCTAssertGreaterThan(report.segments.count, 3)
        XCTAssertEqual(report.recordsChecked, 200)
        for segment in report.segments {
            guard case .valid(let entries, let covered) = segment.hint else { return XCTFail("\(segment)") }
            XCTAssertEqual(entries, segment.records)
            XCTAssertEqual(covered, segment.bytes)
        }

        // Swap two segments' hints: each is valid on its own (its checksum holds) but names another segment.
        let first = dir.appending("0000000001.hint"), second = dir.appending("0000000002.hint")
        let firstBytes = try Data(contentsOf: URL(fileURLWithPath: first))
        try Data(contentsOf: URL(fileURLWithPath: second)).write(to: URL(fileURLWithPath: first))
        try firstBytes.write(to: URL(fileURLWithPath: second))
        report = try CaskStore.verify(at: dir.path)
        XCTAssertEqual(report.damagedRanges, [])
        XCTAssertEqual(report.invalidHints.map(\.file), [first, second])
        XCTAssertEqual(report.segments.prefix(2).map(\.hint), [.invalid, .invalid])
    }

    func testVerifierDecompressesEveryCompressedValue() throws {
        // A record whose checksum holds but whose LZ4 payload does not expand to its value length.
        let dir = TemporaryDirectory("cask-tool")
        var buffer = ByteBuffer(capacity: 4096)
        let value = [UInt8](repeating: 0x61, count: 1000)
        _ = Array("k".utf8).withUnsafeBytes { key in
            value.withUnsafeBytes { value in
                RecordEncoder().append(type: .put, seq: 1, key: key, value: value, expiresAt: nil, to: &buffer)
            }
        }
        var record = buffer.copyBytes()
        XCTAssertEqual(record[5], RecordFlags.lz4, "the value must have been compressed")
        XCTAssertEqual(Array(record[8...9]), [0xE8, 0x07], "value length 1000")
        record[8] = 0xE9  // value length 1001: the payload still expands to 1000 bytes
        StoreFiles.rechecksumRecord(&record)
        let segment = dir.appending("0000000001.cask")
        try Data(SegmentHeader(segmentID: 1, baseSeq: 1).encoded() + record).write(to: URL(fileURLWithPath: segment))

        let report = try CaskStore.verify(at: dir.path)
        XCTAssertEqual(report.recordsChecked, 1)
        XCTAssertEqual(report.damagedRanges, [.init(kind: .record, file: segment, segmentID: 1, offset: 40, length: Int64(record.count), reason: "LZ4 payload does not expand to 1001 bytes")])
        let run = try cask(["verify", dir.path])
        XCTAssertEqual(run.status, 65)
        XCTAssertTrue(run.out.contains("bytes 40..<"), run.out)
    }
}
