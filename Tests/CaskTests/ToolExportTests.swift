import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// `cask dump`, `cask export`, `cask import`, and what `stat` and `verify` gained with them, run
/// as the built binary (through ``ToolTests/cask(_:stdin:file:line:)``).
final class ToolExportTests: XCTestCase {
    func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> ToolTests.Run {
        try ToolTests.cask(arguments, stdin: stdin, file: file, line: line)
    }

    /// 2100-01-01T00:00:00Z: far enough ahead that no test sees it pass.
    static let farFuture: UInt64 = 4_102_444_800_000

    /// A closed store with puts, an lz4 value, an expiry, a delete and a batch (a put, a delete
    /// and a put with expiry, of a binary key among them), all in segment 1.
    private func makeMixedStore() throws -> TemporaryDirectory {
        let dir = TemporaryDirectory("cask-dump")
        let store = try CaskStore.open(at: dir.path)
        try store.put("alpha", Array("one".utf8))
        try store.put("user/42", Array(String(repeating: "name=Ada Lovelace;", count: 6).utf8))
        try store.put(Array("session".utf8), Array("token".utf8), expiresAtMilliseconds: Self.farFuture)
        try store.delete("alpha")
        var batch = WriteBatch()
        batch.put([0xFF, 0x00], [1, 2, 3])
        batch.delete("user/42")
        batch.put(Array("tab\tkey".utf8), Array("v".utf8), expiresAtMilliseconds: Self.farFuture + 123)
        try store.write(batch)
        try store.close()
        return dir
    }

    /// Every live key of the store at `path` with its value and expiry.
    private func contents(of path: String) throws -> [[UInt8]: CaskStore.Entry] {
        let store = try CaskStore.open(at: path, options: .readOnly)
        defer { try? store.close() }
        var entries: [[UInt8]: CaskStore.Entry] = [:]
        for key in try store.keys() { entries[key] = try XCTUnwrap(try store.entry(key)) }
        return entries
    }

    private func jsonLines(_ data: Data) throws -> [[String: Any]] {
        try data.split(separator: UInt8(ascii: "\n")).map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        }
    }

    // MARK: Help

    static let dumpHelp = #"""
        OVERVIEW: List every record of every segment, in file order.

        Reads the segment files as they are, without the index: overwritten and deleted
        records, batch members and batch commits included. Prints a line for each
        segment (id, file, size, base sequence number), then one line per record:
        segment:offset, type (put, delete, batch-commit), seq, bytes (the whole record
        on disk), stored (the payload on disk), value (its length uncompressed), flags
        (lz4, expires, batch: a member of an atomic batch), the expiry time, and last
        the key, escaped as 'cask list' prints keys. A batch commit shows the seqs of
        the members it commits instead of a key. A damaged byte range is printed as a
        'damaged' line with its offset, length, kind (record, segment-header, torn-tail,
        uncommitted-batch) and reason.

        With --json, prints JSON Lines instead: one object per segment, record and
        damaged range, told apart by "kind"; keys that are valid UTF-8 are strings under
        "key", other keys base64 under "keyBase64".

        Checks each record's lengths and checksum, as opening the store does ('cask
        verify' also decompresses values and checks hint files), and exits 0 whatever
        damage it shows. Changes nothing and takes no lock, so it works while another
        process writes (an append in progress at the end of the active segment then
        shows as a torn tail).

        USAGE: cask dump <dir> [--prefix <prefix>] [--escaped] [--segment <id>] [--json]
                         [--key-file <file>]

        ARGUMENTS:
          <dir>                   The store directory.

        OPTIONS:
          --prefix <prefix>       Only records of keys that start with these bytes
                                  (segments and damage are still shown; batch commits
                                  are not).
          --escaped               Read keys and prefixes with the escapes 'cask list'
                                  prints: \xHH for a byte, \\ for a backslash.
          --segment <id>          Only the segment with this id (1 for 0000000001.cask).
          --json                  Print JSON Lines instead of text: one object per line,
                                  object keys sorted.
          --key-file <file>       The key of an encrypted store: a file of 64 hex digits
                                  (as 'cask keygen' writes) or 32 bytes. Needed for an
                                  encrypted store, refused for one that is not.
          -h, --help              Show help information.

        """#

    static let exportHelp = #"""
        OVERVIEW: Write keys, values and expiries as JSON Lines.

        Writes one JSON object per key, one per line, keys in bytewise order, object
        keys sorted: {"key":"user/42","value":"Ada"}. A key or value that is valid UTF-8
        is a JSON string under "key" or "value"; any other is base64 (RFC 4648, padded)
        under "keyBase64" or "valueBase64". A key that expires also has
        "expiresAtMilliseconds", its expiry time in milliseconds since 1970-01-01 UTC.
        Deleted and expired keys are left out. 'cask import' reads this back,
        reproducing keys, values and expiries exactly.

        Opens the store read-only and takes no lock, so it works while another process
        writes; the export is the store as it was when opened. A damaged record stops
        the export with exit 65 ('cask verify' lists the damage); when opening skipped
        damaged records, everything that could be read is exported, a warning goes to
        standard error, and the exit status is 65. With --output, a regular file (or a
        new one) is written under a temporary name next to it and renamed into place
        only when complete; a FIFO, terminal or device is written through, never
        replaced; a directory, a dangling link or a path inside the store is refused.
        Shows progress on standard error (a bar on a terminal, plain lines otherwise).

        USAGE: cask export <dir> [--prefix <prefix>] [--escaped] [--output <file>]
                           [--key-file <file>]

        ARGUMENTS:
          <dir>                   The store directory.

        OPTIONS:
          --prefix <prefix>       Only keys that start with these bytes.
          --escaped               Read keys and prefixes with the escapes 'cask list'
                                  prints: \xHH for a byte, \\ for a backslash.
          --output <file>         Write to this file (mode 0600) instead of standard
                                  output.
          --key-file <file>       The key of an encrypted store: a file of 64 hex digits
                                  (as 'cask keygen' writes) or 32 bytes. Needed for an
                                  encrypted store, refused for one that is not.
          -h, --help              Show help information.

        """#

    static let importHelp = #"""
        OVERVIEW: Put the entries of a 'cask export' file into a store.

        Reads JSON Lines as 'cask export' writes them: one object per line with "key" or
        "keyBase64", "value" or "valueBase64", and optionally "expiresAtMilliseconds"
        (see 'cask help export'); blank lines are skipped. Each entry is put with its
        expiry, replacing the key's value; keys the input does not name are left alone.
        An entry whose expiry has passed is written too, and reads as absent.

        Checks every line before writing anything, strictly: JSON as RFC 8259 defines
        it, no field twice, base64 in its one canonical padded form, a byte-order mark
        only at the start of the input. A malformed line is reported with its line
        number (and the column, where there is one) and the command exits 65, having
        imported nothing (and created no store). Then it creates the store if <dir> does
        not exist (encrypted, when --key-file is given) and takes its lock, so it fails
        (exit 1) while another process has the store open for writing. Entries are
        written in atomic batches: after a crash, each batch is in the store in full or
        not at all. Everything is on disk (fdatasync) when the command exits 0.

        Standard input that is not a regular file (a pipe) is copied to an unlinked
        temporary file while it is checked, so that it can be read twice. Shows progress
        on standard error (a bar on a terminal, plain lines otherwise).

        USAGE: cask import <dir> [--input <file>] [--batch-size <n>] [--json]
                           [--key-file <file>]

        ARGUMENTS:
          <dir>                   The store directory.

        OPTIONS:
          --input <file>          Read this file instead of standard input.
          --batch-size <n>        Entries per atomic batch, 1 to 100000 (default 1000);
                                  a batch closes early at 16 MiB of keys and values.
          --json                  Print JSON instead of text (object keys sorted).
          --key-file <file>       The key of an encrypted store: a file of 64 hex digits
                                  (as 'cask keygen' writes) or 32 bytes. Needed for an
                                  encrypted store, refused for one that is not; a store
                                  this command creates is encrypted with it.
          -h, --help              Show help information.

        """#

    func testHelpSnapshots() throws {
        for (command, expected) in [("dump", Self.dumpHelp), ("export", Self.exportHelp), ("import", Self.importHelp)] {
            for arguments in [[command, "--help"], ["help", command]] {
                let run = try cask(arguments)
                XCTAssertEqual(run.status, 0, "\(arguments)")
                XCTAssertEqual(run.out, expected, "\(arguments)")
                XCTAssertEqual(run.err, "", "\(arguments)")
            }
            XCTAssertFalse(expected.split(separator: "\n").contains { $0.count > 80 }, "\(command): a line over 80 columns")
        }
        let root = try cask(["help"]).out
        XCTAssertTrue(root.contains("\n  dump                    List every record of every segment, in file order.\n"), root)
        XCTAssertTrue(root.contains("\n  export                  Write keys, values and expiries as JSON Lines.\n"), root)
        XCTAssertTrue(root.contains("\n  import                  Put the entries of a 'cask export' file into a store.\n"), root)
        for command in ["stat", "verify"] {
            XCTAssertFalse(try cask(["help", command]).out.split(separator: "\n").contains { $0.count > 80 }, command)
        }
    }

    // MARK: Exit statuses

    func testUsageErrorsExit64() throws {
        let dir = try makeMixedStore()
        let cases: [([String], String)] = [
            (["dump"], "Error: missing argument <dir>\nUsage: cask dump <dir> [--prefix <prefix>] [--escaped] [--segment <id>] [--json] [--key-file <file>]\n"),
            (["dump", dir.path, "--segment", "0"], "Error: --segment must be a segment id from 1 to 4294967294, not '0'\n"),
            (["dump", dir.path, "--segment", "x1"], "Error: --segment must be a segment id from 1 to 4294967294, not 'x1'\n"),
            (["dump", dir.path, "--prefix", #"\x"#, "--escaped"], "Error: --prefix has an invalid escape at byte 0"),
            (["export", dir.path, "--output"], "Error: missing value for option '--output <file>'\nUsage: cask export <dir> [--prefix <prefix>] [--escaped] [--output <file>] [--key-file <file>]\n"),
            (["export", dir.path, "--json"], "Error: unknown option '--json'\n"),
            (["import", dir.path, "--batch-size", "0"], "Error: --batch-size must be a whole number from 1 to 100000, not '0'\nUsage: cask import <dir> [--input <file>] [--batch-size <n>] [--json] [--key-file <file>]\n"),
            (["import", dir.path, "--batch-size", "100001"], "Error: --batch-size must be a whole number from 1 to 100000, not '100001'\n"),
            (["import", dir.path, "extra"], "Error: unexpected argument 'extra'\n"),
        ]
        for (arguments, error) in cases {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 64, "\(arguments)")
            XCTAssertTrue(run.err.hasPrefix(error), "\(arguments): \(run.err)")
            XCTAssertTrue(run.err.contains("\nUsage: cask \(arguments[0]) "), "\(arguments): \(run.err)")
            XCTAssertEqual(run.out, "", "\(arguments)")
        }
    }

    func testFailuresExit1AndDataErrorsExit65() throws {
        let dir = try makeMixedStore()
        let missing = dir.appending("no-such-store")
        var run = try cask(["dump", missing])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: store directory \(missing) does not exist; check the path (put, import and import-defaults create a store where there is none)\n")
        run = try cask(["export", missing])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: store directory \(missing) does not exist; check the path (put, import and import-defaults create a store where there is none)\n")
        run = try cask(["dump", dir.path, "--segment", "9"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: \(CaskError.io(operation: "open", path: dir.appending("0000000009.cask"), errno: .noEntry))\n")
        XCTAssertEqual(run.out, "")
        run = try cask(["import", missing, "--input", dir.appending("no-such-file")])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: cannot open \(dir.appending("no-such-file")): No such file or directory\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing), "a failed import created the store")

        // Malformed input: 65, and nothing written.
        run = try cask(["import", missing], stdin: Data("{\"key\":\"k\"}\n".utf8))
        XCTAssertEqual(run.status, 65)
        XCTAssertEqual(run.err, "Error: line 1 of standard input: no value: give \"value\" (UTF-8 text) or \"valueBase64\"; nothing was imported\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing))

        // A damaged record stops an export: 65, and no output file is left behind.
        let damaged = try makeMixedStore()
        let segment = damaged.appending("0000000001.cask")
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        bytes[110] ^= 0x01  // in the record of "session" (offset 103, 29 bytes): see testDumpListsEveryRecord
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        let outputs = TemporaryDirectory("cask-export-out")
        let file = outputs.appending("export.jsonl")
        run = try cask(["export", damaged.path, "--output", file])
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertTrue(run.err.contains("Error: corrupt record in \(segment) at offset 103: checksum mismatch"), run.err)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: outputs.path), [], "neither the file nor a temporary one")
        // dump shows that damage and exits 0.
        run = try cask(["dump", damaged.path])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertTrue(run.out.contains("\n1:103 damaged bytes=29 kind=record reason=checksum mismatch"), run.out)
    }

    func testImportRefusesWhileAnotherProcessHoldsTheLock() throws {
        let dir = TemporaryDirectory("cask-import")
        let store = try CaskStore.open(at: dir.path)
        defer { try? store.close() }
        try store.put("held", Array("by the test".utf8))
        let run = try cask(["import", dir.path, "--batch-size", "1"], stdin: Data("{\"key\":\"new\",\"value\":\"v\"}\n".utf8))
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.err.hasSuffix("Error: \(CaskError.locked(path: dir.path, holderPID: getpid()))\n"), run.err)
        XCTAssertEqual(run.out, "")
        XCTAssertEqual(try store.keys(), [Array("held".utf8)])
        let reader = try CaskStore.open(at: dir.path, options: .readOnly)
        XCTAssertEqual(try reader.keys(), [Array("held".utf8)], "nothing reached the disk")
        try reader.close()
        // Readers work alongside the writer.
        XCTAssertEqual(try cask(["export", dir.path]).out, "{\"key\":\"held\",\"value\":\"by the test\"}\n")
        XCTAssertEqual(try cask(["dump", dir.path]).status, 0)
    }

    // MARK: dump

    func testDumpListsEveryRecord() throws {
        let dir = try makeMixedStore()
        let file = dir.appending("0000000001.cask")
        var run = try cask(["dump", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.err, "")
        XCTAssertEqual(run.out, """
            segment 1: \(file), 219 bytes, base seq 1
            1:40 put seq=1 bytes=17 stored=3 value=3 key=alpha
            1:57 put seq=2 bytes=46 stored=29 value=108 flags=lz4 key=user/42
            1:103 put seq=3 bytes=29 stored=5 value=5 flags=expires expires=2100-01-01T00:00:00.000Z key=session
            1:132 delete seq=4 bytes=14 stored=0 value=0 key=alpha
            1:146 put seq=5 bytes=14 stored=3 value=3 flags=batch key=\\xff\\x00
            1:160 delete seq=6 bytes=16 stored=0 value=0 flags=batch key=user/42
            1:176 put seq=7 bytes=25 stored=1 value=1 flags=expires,batch expires=2100-01-01T00:00:00.123Z key=tab\\x09key
            1:201 batch-commit seq=8 bytes=18 stored=1 value=1 commits=5...7
            1 segment, 8 records, 0 damaged ranges

            """)

        // JSON Lines: the same records, with binary keys in base64.
        run = try cask(["dump", dir.path, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let lines = try jsonLines(run.stdout)
        XCTAssertEqual(lines.map { $0["kind"] as? String }, ["segment"] + Array(repeating: "record", count: 8))
        XCTAssertEqual(lines[0]["file"] as? String, file)
        XCTAssertEqual(lines[0]["baseSeq"] as? Int, 1)
        XCTAssertEqual(lines.dropFirst().map { $0["offset"] as? Int }, [40, 57, 103, 132, 146, 160, 176, 201])
        XCTAssertEqual(lines.dropFirst().map { $0["type"] as? String }, ["put", "put", "put", "delete", "put", "delete", "put", "batch-commit"])
        XCTAssertEqual(lines[2]["flags"] as? [String], ["lz4"])
        XCTAssertEqual(lines[2]["storedBytes"] as? Int, 29)
        XCTAssertEqual(lines[2]["valueBytes"] as? Int, 108)
        XCTAssertEqual((lines[3]["expiresAtMilliseconds"] as? NSNumber)?.uint64Value, Self.farFuture)
        XCTAssertEqual(lines[5]["keyBase64"] as? String, "/wA=")
        XCTAssertNil(lines[5]["key"])
        XCTAssertEqual(lines[7]["key"] as? String, "tab\tkey")
        XCTAssertEqual(lines[7]["flags"] as? [String], ["expires", "batch"])
        XCTAssertEqual(lines[8]["commitsFirstSeq"] as? Int, 5)
        XCTAssertEqual(lines[8]["commitsLastSeq"] as? Int, 7)
        XCTAssertNil(lines[8]["key"])
        XCTAssertEqual(try XCTUnwrap(run.out.split(separator: "\n").first), #"{"baseSeq":1,"bytes":219,"file":"\#(file)","kind":"segment","segment":1}"#, "compact, keys sorted")

        // --prefix keeps the segment line and the matching records.
        run = try cask(["dump", dir.path, "--prefix", "user/"])
        XCTAssertEqual(run.out, """
            segment 1: \(file), 219 bytes, base seq 1
            1:57 put seq=2 bytes=46 stored=29 value=108 flags=lz4 key=user/42
            1:160 delete seq=6 bytes=16 stored=0 value=0 flags=batch key=user/42
            1 segment, 2 records, 0 damaged ranges

            """)
        run = try cask(["dump", dir.path, "--prefix", #"\xff"#, "--escaped", "--json"])
        XCTAssertEqual(try jsonLines(run.stdout).compactMap { $0["keyBase64"] as? String }, ["/wA="])
    }

    func testDumpShowsDamageAndReadsOn() throws {
        // Three segments; damage in the middle of the first, a torn tail at the end of the last.
        let dir = TemporaryDirectory("cask-dump")
        var options = CaskStore.Options()
        options.maxSegmentSize = 4096
        let store = try CaskStore.open(at: dir.path, options: options)
        var rng = SeededGenerator(seed: 5)
        for i in 0..<90 { try store.put("k\(i)", rng.bytes(100)) }  // k0...k9 111 bytes each, the others 112
        try store.close()
        let first = dir.appending("0000000001.cask"), last = dir.appending("0000000003.cask")
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: first)))
        bytes[40 + 111 * 2 + 50] ^= 0x01  // inside the value of k2
        try Data(bytes).write(to: URL(fileURLWithPath: first))
        let lastLength = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: last)[.size] as? Int)
        try FileHandle(forWritingTo: URL(fileURLWithPath: last)).truncate(atOffset: UInt64(lastLength - 10))
        // As a crash leaves it: no hint for the active segment (one written at close, describing more
        // than the file holds, would make this a lost tail, not a torn one).
        try FileManager.default.removeItem(atPath: dir.appending("0000000003.hint"))

        var run = try cask(["dump", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        var lines = run.out.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { $0.hasPrefix("segment ") }.count, 3)
        XCTAssertTrue(lines.contains("1:151 put seq=2 bytes=111 stored=100 value=100 key=k1"), run.out)
        XCTAssertTrue(lines.contains { $0.hasPrefix("1:262 damaged bytes=111 kind=record reason=checksum mismatch") }, run.out)
        XCTAssertTrue(lines.contains("1:373 put seq=4 bytes=111 stored=100 value=100 key=k3"), "records after the damage: \(run.out)")
        XCTAssertTrue(lines.contains("3:\(lastLength - 112) damaged bytes=102 kind=torn-tail reason=record is cut short (needs 112 bytes)"), run.out)
        XCTAssertEqual(lines.last, "3 segments, 88 records, 2 damaged ranges")

        // One segment; JSON names the damage's file, kind and reason.
        run = try cask(["dump", dir.path, "--segment", "1", "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let objects = try jsonLines(run.stdout)
        XCTAssertEqual(Set(objects.compactMap { $0["segment"] as? Int }), [1])
        let damage = try XCTUnwrap(objects.first { $0["kind"] as? String == "damage" })
        XCTAssertEqual(damage["file"] as? String, first)
        XCTAssertEqual(damage["offset"] as? Int, 262)
        XCTAssertEqual(damage["bytes"] as? Int, 111)
        XCTAssertEqual(damage["damage"] as? String, "record")
        XCTAssertTrue((damage["reason"] as? String ?? "").hasPrefix("checksum mismatch"), "\(damage)")

        // A bad segment header is damage too; the records behind it are still listed.
        bytes[20] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: first))
        run = try cask(["dump", dir.path, "--segment", "1"])
        XCTAssertEqual(run.status, 0, run.err)
        lines = run.out.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines[0], "segment 1: \(first), \(bytes.count) bytes, base seq unknown (invalid header)")
        XCTAssertEqual(lines[1], "1:0 damaged bytes=40 kind=segment-header reason=invalid segment header (header checksum mismatch)")
        XCTAssertEqual(lines[2], "1:40 put seq=1 bytes=111 stored=100 value=100 key=k0")
    }

    func testInspectMatchesTheToolAndTheIndex() throws {
        let dir = try makeMixedStore()
        var items: [InspectedItem] = []
        try CaskStore.inspect(at: dir.path) { items.append($0) }
        XCTAssertEqual(items.count, 9)
        guard case .record(let commit) = items[8], case .record(let member) = items[7] else { return XCTFail("\(items)") }
        XCTAssertEqual(commit.type, .batch)
        XCTAssertEqual(commit.committedSeqs, 5..<8)
        XCTAssertEqual(member, InspectedRecord(
            segmentID: 1, offset: 176, bytes: 25, type: .put, seq: 7, key: Array("tab\tkey".utf8), valueBytes: 1, storedBytes: 1,
            isCompressed: false, isBatchMember: true, expiresAtMilliseconds: Self.farFuture + 123, committedSeqs: nil))
        let store = try CaskStore.open(at: dir.path, options: .readOnly)
        defer { try? store.close() }
        XCTAssertEqual(try store.entry(Array("tab\tkey".utf8)), .init(key: Array("tab\tkey".utf8), value: Array("v".utf8), expiresAtMilliseconds: Self.farFuture + 123))
        XCTAssertEqual(try store.entry([0xFF, 0x00]), .init(key: [0xFF, 0x00], value: [1, 2, 3]))
        XCTAssertNil(try store.entry(Array("user/42".utf8)), "deleted in the batch")
    }

    // MARK: export and import

    func testExportImportRoundTripIsExact() throws {
        let source = TemporaryDirectory("cask-export")
        var options = CaskStore.Options()
        options.maxSegmentSize = 64 << 10
        let store = try CaskStore.open(at: source.path, options: options)
        var rng = SeededGenerator(seed: 11)
        var expected: [[UInt8]: CaskStore.Entry] = [:]
        func put(_ key: [UInt8], _ value: [UInt8], expiresAt: UInt64? = nil) throws {
            if let expiresAt { try store.put(key, value, expiresAtMilliseconds: expiresAt) } else { try store.put(key, value) }
            expected[key] = .init(key: key, value: value, expiresAtMilliseconds: expiresAt)
        }
        try put(Array("plain".utf8), Array("text".utf8))
        try put(Array("empty value".utf8), [])
        try put([0xFF, 0xFE, 0x00, 0x80], Array(0...255))  // binary key and value
        try put(Array("nul\0and\nnewline".utf8), Array("\0\r\n\t\"\\/".utf8))  // valid UTF-8 with control characters
        try put(Array("e\u{301} vs \u{e9} 🦊".utf8), Array("decomposed, composed, astral".utf8))  // no normalisation
        try put(Array("\u{FEFF}bom".utf8), Array("\u{FEFF}".utf8))
        try put([0xED, 0xA0, 0x80], [0xC0, 0xAF])  // a UTF-8 surrogate and an overlong form: not UTF-8
        try put(Array("big/random".utf8), rng.bytes(300_000))
        try put(Array("big/zeros".utf8), [UInt8](repeating: 0, count: 200_000) + [0xFF])
        try put(Array("expires".utf8), Array("soon enough".utf8), expiresAt: Self.farFuture + 7)
        for i in 0..<500 {
            try put(Array("user/\(i)".utf8), Array("value \(i) ".utf8) + rng.bytes(i % 40), expiresAt: i % 3 == 0 ? Self.farFuture + UInt64(i) : nil)
        }
        for i in stride(from: 0, to: 500, by: 7) {
            try store.delete("user/\(i)")
            expected[Array("user/\(i)".utf8)] = nil
        }
        try store.put(Array("expired".utf8), Array("gone".utf8), expiresAtMilliseconds: 1)  // never exported
        var batch = WriteBatch()
        batch.put(Array("batched".utf8), [7, 7, 7], expiresAtMilliseconds: Self.farFuture)
        try store.write(batch)
        expected[Array("batched".utf8)] = .init(key: Array("batched".utf8), value: [7, 7, 7], expiresAtMilliseconds: Self.farFuture)
        try store.close()
        XCTAssertEqual(try contents(of: source.path), expected)

        // To a file, back through --input.
        let outputs = TemporaryDirectory("cask-export-out")
        let file = outputs.appending("export.jsonl")
        var run = try cask(["export", source.path, "--output", file])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "exported \(expected.count) keys to \(file)\n")
        XCTAssertTrue(run.err.hasPrefix("exporting: 0% (0 of \(expected.count) keys, "), run.err)
        XCTAssertTrue(run.err.contains("exporting: 100% (\(expected.count) of \(expected.count) keys, "), run.err)
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let exported = try Data(contentsOf: URL(fileURLWithPath: file))
        let lines = try jsonLines(exported)
        XCTAssertEqual(lines.count, expected.count)
        // JSONDecoder, not JSONSerialization: on Linux the latter drops a U+FEFF that starts a string.
        struct Key: Decodable { var key: String?, keyBase64: String? }
        let exportedKeys = try exported.split(separator: UInt8(ascii: "\n")).map { line -> [UInt8] in
            let decoded = try JSONDecoder().decode(Key.self, from: Data(line))
            if let text = decoded.key { return Array(text.utf8) }
            return [UInt8](try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(decoded.keyBase64))))
        }
        XCTAssertEqual(exportedKeys, expected.keys.sorted { $0.lexicographicallyPrecedes($1) }, "every key, in bytewise order")
        XCTAssertTrue(lines.contains { $0["keyBase64"] as? String == Data([0xFF, 0xFE, 0x00, 0x80]).base64EncodedString() && $0["valueBase64"] != nil })
        XCTAssertTrue(lines.contains { $0["key"] as? String == "nul\0and\nnewline" && $0["value"] as? String == "\0\r\n\t\"\\/" })
        XCTAssertFalse(lines.contains { $0["key"] as? String == "expired" })

        let copy = TemporaryDirectory("cask-import")
        let target = copy.appending("store")
        run = try cask(["import", target, "--input", file, "--batch-size", "64"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "imported \(expected.count) entries from \(file) into \(target) in \((expected.count + 63) / 64) batches\n")
        XCTAssertTrue(run.err.hasPrefix("checking: "), run.err)
        XCTAssertTrue(run.err.contains("importing: 100% "), run.err)
        XCTAssertEqual(try contents(of: target), expected)
        XCTAssertEqual(try cask(["verify", target]).status, 0)

        // Through pipes: export to standard output, import from standard input.
        run = try cask(["export", source.path])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.stdout, exported, "the same bytes on standard output")
        let piped = copy.appending("piped")
        run = try cask(["import", piped, "--json"], stdin: run.stdout)
        XCTAssertEqual(run.status, 0, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any], run.out)
        XCTAssertEqual(report["entries"] as? Int, expected.count)
        XCTAssertEqual(report["batches"] as? Int, (expected.count + 999) / 1000)
        XCTAssertEqual(report["directory"] as? String, piped)
        XCTAssertEqual(try contents(of: piped), expected)
        XCTAssertEqual(try cask(["export", piped]).stdout, exported, "a second round trip changes nothing")

        // --prefix exports a subset, still sorted.
        run = try cask(["export", source.path, "--prefix", "user/1"])
        let keys = try jsonLines(run.stdout).compactMap { $0["key"] as? String }
        XCTAssertEqual(keys, expected.keys.compactMap { String(validating: $0, as: UTF8.self) }.filter { $0.hasPrefix("user/1") }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    func testImportOfAMalformedLineImportsNothing() throws {
        var lines = (1...2000).map { #"{"key":"k\#($0)","value":"v\#($0)"}"# }
        lines[1499] = #"{"key":"k1500","valueBase64":"not base64!"}"#
        let input = Data((lines.joined(separator: "\n") + "\n").utf8)
        let dir = TemporaryDirectory("cask-import")
        let target = dir.appending("store")
        var run = try cask(["import", target, "--batch-size", "10"], stdin: input)
        XCTAssertEqual(run.status, 65)
        XCTAssertEqual(run.err, "Error: line 1500 of standard input: \"valueBase64\" is not valid base64: it has a character outside the base64 alphabet (or '=' before the end) at offset 3; nothing was imported\n")
        XCTAssertEqual(run.out, "")
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), "no store is created")

        // Into an existing store: it is left exactly as it was.
        let store = try CaskStore.open(at: target)
        try store.put("k1", Array("before".utf8))
        try store.close()
        let file = dir.appending("input.jsonl")
        try input.write(to: URL(fileURLWithPath: file))
        run = try cask(["import", target, "--input", file, "--batch-size", "10"])
        XCTAssertEqual(run.status, 65)
        XCTAssertEqual(run.err.split(separator: "\n").last.map(String.init), "Error: line 1500 of \(file): \"valueBase64\" is not valid base64: it has a character outside the base64 alphabet (or '=' before the end) at offset 3; nothing was imported")
        XCTAssertEqual(try contents(of: target), [Array("k1".utf8): .init(key: Array("k1".utf8), value: Array("before".utf8))])

        // Each way a line can be wrong names its line; blank lines count and are skipped.
        let cases: [(String, String)] = [
            ("nope", "not valid JSON: expected '{' at column 1"),
            (#"["k","v"]"#, "not a JSON object"),
            (#"{"key":"k","value":"v"} trailing"#, "not valid JSON: text after the object at column 25"),
            // Issue 27, finding 5: each of these was accepted (the first of two fields winning).
            (#"{"key":"k","value":"v","key":"other"}"#, #"the field "key" appears twice at column 24"#),
            (#"{"key":"k","value":"v",}"#, "not valid JSON: a trailing comma before '}' at column 24"),
            ("\u{FEFF}{\"key\":\"k\",\"value\":\"v\"}", "a byte-order mark (U+FEFF) is allowed only at the start of the input at column 1"),
            (#"{"key":"k","valueBase64":"ax=="}"#, #""valueBase64" is not valid base64: its last character has bits set past the data (not the canonical encoding)"#),
            (#"{"key":"k","valueBase64":"a w="}"#, #""valueBase64" is not valid base64: it has a character outside the base64 alphabet (or '=' before the end) at offset 1"#),
            (#"{"key":"k","valueBase64":"YQ==YQ=="}"#, #""valueBase64" is not valid base64: it goes on after its padding '=' at offset 4"#),
            (#"{"key":"k","valueBase64":"YQ="}"#, #""valueBase64" is not valid base64: its length is not a multiple of 4 (padding with '=' is required)"#),
            // A bad escape and a raw control character were "value is not a string".
            (#"{"key":"k","value":"a\qb"}"#, #"not valid JSON: an invalid escape '\q' in a string at column 22"#),
            ("{\"key\":\"k\",\"value\":\"a\u{01}b\"}", "not valid JSON: a raw control character (byte 0x01) in a string; escape it at column 22"),
            (#"{"key":"k","value":"\ud800"}"#, #"not valid JSON: \uD800 is a lone UTF-16 surrogate at column 21"#),
            (#"{"key":"k","value":"v","expiresAtMilliseconds":01}"#, "not valid JSON: a number with a leading zero at column 48"),
            (#"{"key":"k","value":"v","expiresAtMilliseconds":1e3}"#, #""expiresAtMilliseconds" is not an integer from 0 to 18446744073709551615"#),
            (#"{"key":"k","value":"v","expiresAtMilliseconds":18446744073709551616}"#, #""expiresAtMilliseconds" is not an integer from 0 to 18446744073709551615"#),
            (#"{'key':"k","value":"v"}"#, "not valid JSON: expected a field name in double quotes at column 2"),
            (#"{"value":"v"}"#, #"no key: give "key" (UTF-8 text) or "keyBase64""#),
            (#"{"key":"k","keyBase64":"aw==","value":"v"}"#, #"both "key" and "keyBase64" (give one)"#),
            (#"{"key":"","value":"v"}"#, "the key is empty (keys are 1 to 65535 bytes)"),
            (#"{"key":7,"value":"v"}"#, #""key" is not a string"#),
            (#"{"key":"k","value":"v","expires_at_ms":5}"#, #"unknown field "expires_at_ms" (a line has "key" or "keyBase64", "value" or "valueBase64", and may have "expiresAtMilliseconds")"#),
            (#"{"key":"k","value":"v","expiresAtMilliseconds":-1}"#, #""expiresAtMilliseconds" is not an integer from 0 to 18446744073709551615"#),
            (#"{"key":"k","value":"v","expiresAtMilliseconds":"soon"}"#, #""expiresAtMilliseconds" is not an integer from 0 to 18446744073709551615"#),
            ("{\"keyBase64\":\"\(Data(count: 65_536).base64EncodedString())\",\"value\":\"\"}", "the key is 65536 bytes, over the limit of 65535 bytes"),
        ]
        for (line, reason) in cases {
            run = try cask(["import", dir.appending("other")], stdin: Data("{\"key\":\"ok\",\"value\":\"1\"}\n\n  \n\(line)\n".utf8))
            XCTAssertEqual(run.status, 65, line)
            XCTAssertEqual(run.err, "Error: line 4 of standard input: \(reason); nothing was imported\n", line)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appending("other")))
    }

    // MARK: stat and verify

    func testStatShowsRecordsAndCompressionRatioPerSegment() throws {
        let dir = TemporaryDirectory("cask-stat")
        let store = try CaskStore.open(at: dir.path)
        try store.put("packed", [UInt8](repeating: 0x61, count: 10_000))  // compresses well
        try store.put("raw", [1, 2, 3])
        try store.put("raw", [4, 5, 6])
        try store.delete("packed")
        let statistics = try store.statistics()
        try store.close()

        var run = try cask(["stat", dir.path, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        let segment = try XCTUnwrap((report["segments"] as? [[String: Any]])?.first)
        let bytes = try XCTUnwrap(segment["bytes"] as? Int)
        XCTAssertEqual(segment["records"] as? Int, 4)
        XCTAssertEqual(segment["liveRecords"] as? Int, 1)
        XCTAssertEqual(segment["deadRecords"] as? Int, 3)
        XCTAssertEqual(segment["valueBytes"] as? Int, 10_006)
        XCTAssertEqual((segment["liveBytes"] as? NSNumber)?.int64Value, statistics.segments[0].liveBytes)
        XCTAssertEqual((segment["deadBytes"] as? NSNumber)?.int64Value, statistics.segments[0].deadBytes)
        let ratio = (Double(10_006) / Double(bytes - 40) * 1000).rounded() / 1000
        XCTAssertGreaterThan(ratio, 10)
        XCTAssertEqual(segment["compressionRatio"] as? Double, ratio)
        XCTAssertEqual(report["compressionRatio"] as? Double, ratio)
        XCTAssertEqual(report["valueBytes"] as? Int, 10_006)
        XCTAssertEqual(segment["minSeq"] as? Int, 1)
        XCTAssertEqual(segment["maxSeq"] as? Int, 4)

        run = try cask(["stat", dir.path])
        let lines = run.out.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains { $0.hasPrefix("compression ratio:") && $0.hasSuffix(" " + String(format: "%.2f", ratio)) }, run.out)
        let header = try XCTUnwrap(lines.first { $0.hasPrefix("ID ") })
        XCTAssertEqual(header.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " "),
                       "ID FILE BYTES RECORDS LIVE DEAD LIVE BYTES DEAD BYTES VALUE BYTES RATIO DICT SEQ")
        let row = try XCTUnwrap(lines.first { $0.contains("0000000001.cask") })
        XCTAssertEqual(row.split(separator: " ").map(String.init),
                       ["1", "0000000001.cask", "\(bytes)", "4", "1", "3", "\(statistics.segments[0].liveBytes)",
                        "\(statistics.segments[0].deadBytes)", "10006", String(format: "%.2f", ratio), "-", "1-4"])
    }

    func testVerifyReportsProgress() throws {
        let dir = TemporaryDirectory("cask-verify")
        var options = CaskStore.Options()
        options.maxSegmentSize = 64 << 10
        let store = try CaskStore.open(at: dir.path, options: options)
        var rng = SeededGenerator(seed: 2)
        for i in 0..<60 { try store.put("k\(i)", rng.bytes(10_000)) }
        try store.close()
        let run = try cask(["verify", dir.path])
        XCTAssertEqual(run.status, 0, run.out + run.err)
        // Not a terminal: a plain line per 10%, from 0% to 100% of the segment bytes.
        let lines = run.err.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first?.hasPrefix("verifying: 0% (0 B of "), true, run.err)
        XCTAssertEqual(lines.last?.hasPrefix("verifying: 100% ("), true, run.err)
        XCTAssertGreaterThan(lines.count, 5, run.err)
        let percents = lines.map { Int($0.dropFirst("verifying: ".count).prefix { $0.isNumber }) ?? -1 }
        XCTAssertEqual(percents, percents.sorted(), run.err)
    }
}
