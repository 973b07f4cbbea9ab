import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Input a hostile (or careless) user gives the `cask` tool: endless or oversized standard input,
/// and the limits each command's help promises. Runs the built binary.
final class HostileInputTests: XCTestCase {
    /// Runs `script` with `sh -c` under `timeout 120`, returning its status and standard error.
    private func shell(_ script: String) throws -> (status: Int32, err: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments = ["120", "/bin/sh", "-c", script]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, err)
    }

    /// Issue 27, finding 6: `yes | cask put s k` read forever (about 100 GB in 4 s) instead of
    /// stopping at the value limit + 1 byte, and an over-limit value exited 1 (65 from `import`).
    func testPutStopsReadingAnEndlessInputAtTheLimit() throws {
        let dir = TemporaryDirectory("cask-input")
        let limit = CaskStore.Options().maxValueSize
        // `yes` inherits this process's SIGPIPE disposition, ignored once a ToolTests helper ran in
        // the same process: it then prints "Broken pipe" when put stops reading. Only put's words count.
        let run = try shell("yes 2>/dev/null | '\(ToolTests.toolPath)' put '\(dir.path)' k")
        XCTAssertNotEqual(run.status, 124, "put was still reading after 120 s")
        XCTAssertEqual(run.status, 65, run.err)
        XCTAssertEqual(run.err, "Error: the value on standard input is over the limit of \(limit) bytes (reading stopped at byte \(limit + 1)); nothing was written\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appending("LOCK")), "the store was opened")
        // The help states the limits.
        let help = try ToolTests.cask(["put", "--help"]).out
        XCTAssertTrue(help.contains("A value is at most \(limit) bytes (64 MiB): reading stops at the first byte over\nthat, and the command exits 65 with nothing written."), help)
    }

    /// A byte-order mark may start the input (and only there: see ToolExportTests' malformed lines);
    /// raw bytes in a string must be UTF-8.
    func testImportTakesAByteOrderMarkAtTheStartAndRefusesInvalidUTF8() throws {
        let dir = TemporaryDirectory("cask-input")
        var input = Data([0xEF, 0xBB, 0xBF])
        input += Data("{\"key\":\"k\",\"value\":\"v\"}\n".utf8)
        var run = try ToolTests.cask(["import", dir.appending("s")], stdin: input)
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try ToolTests.cask(["get", dir.appending("s"), "k"]).out, "v")
        // The column of the first byte that cannot be part of the sequence.
        for (bytes, column) in [([0xC3, 0x28], 22), ([0xED, 0xA0, 0x80], 22), ([0xF4, 0x90, 0x80, 0x80], 22), ([0xE2, 0x82], 23), ([0xFF], 21)] as [([UInt8], Int)] {
            let line = Data(#"{"key":"k","value":""#.utf8) + Data(bytes) + Data("\"}\n".utf8)
            run = try ToolTests.cask(["import", dir.appending("t")], stdin: line)
            XCTAssertEqual(run.status, 65, "\(bytes)")
            XCTAssertTrue(run.err.hasPrefix("Error: line 1 of standard input: not valid UTF-8 ("), run.err)
            XCTAssertTrue(run.err.hasSuffix(" at column \(column); nothing was imported\n"), run.err)
        }
    }

    // MARK: Messages and exit codes (issue 27, findings 8 and 9)

    /// A closed store of one key, `k`.
    private func store() throws -> TemporaryDirectory {
        let dir = TemporaryDirectory("cask-input")
        let store = try CaskStore.open(at: dir.appending("s"))
        try store.put("k", Array("v".utf8))
        try store.close()
        return dir
    }

    func testMessagesNameWhatHappened() throws {
        let dir = try store()
        let s = dir.appending("s")
        // No library jargon ("open with createIfMissing") in the tool.
        var run = try ToolTests.cask(["get", dir.appending("missing"), "k"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.err, "Error: store directory \(dir.appending("missing")) does not exist; check the path (put, import and import-defaults create a store where there is none)\n")
        // A read with a key over the limit did not write anything, and says so.
        run = try ToolTests.cask(["get", s, String(repeating: "k", count: 65_536)])
        XCTAssertEqual(run.status, 64)
        XCTAssertTrue(run.err.hasPrefix("Error: key is 65536 bytes, over the limit of 65535 bytes (keys are 1 to 65535 bytes); nothing was read or written\n"), run.err)
        // import with standard input closed imported 0 entries and exited 0; a directory as input
        // printed "NSCocoaErrorDomain error 256".
        let closed = try shell("'\(ToolTests.toolPath)' import '\(dir.appending("t"))' <&-")
        XCTAssertEqual(closed.status, 1, closed.err)
        XCTAssertEqual(closed.err, "Error: cannot read standard input: it is closed; give --input <file> or redirect a file to it\n")
        run = try ToolTests.cask(["import", dir.appending("t"), "--input", dir.path])
        XCTAssertEqual(run.status, 1, run.err)
        XCTAssertEqual(run.err, "Error: cannot read \(dir.path): it is a directory; name a file\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appending("t")))
    }

    /// A segment of a format version this Cask cannot read is data it refuses: exit 65, as for an
    /// unsupported header length (it exited 1).
    func testUnsupportedFormatVersionExits65() throws {
        let dir = try store()
        let segment = dir.appending("s/" + SegmentName.segment(1))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        bytes[8] = 5  // format version 5, the header's checksum made right again
        StoreFiles.rechecksumSegmentHeader(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        for arguments in [["get", dir.appending("s"), "k"], ["verify", dir.appending("s")]] {
            let run = try ToolTests.cask(arguments)
            XCTAssertEqual(run.status, 65, "\(arguments): \(run.err)")
            XCTAssertTrue(run.err.contains("Error: \(segment) has format version 5, which this Cask (formats 1 to 4) cannot read"), run.err)
        }
    }

    /// `stat` counted expired keys among the keys.
    func testStatDoesNotCountExpiredKeys() throws {
        let dir = TemporaryDirectory("cask-input")
        let store = try CaskStore.open(at: dir.path)
        try store.put("stays", [1])
        try store.put("goes", [2], expiresAfter: .milliseconds(1))
        Thread.sleep(forTimeInterval: 0.05)
        let statistics = try store.statistics()
        XCTAssertEqual(statistics.keys, 1)
        XCTAssertEqual(statistics.expiredKeys, 1)
        try store.close()
        let run = try ToolTests.cask(["stat", dir.path, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any]
        XCTAssertEqual(report?["keys"] as? Int, 1, run.out)
    }

    /// As another user (CI runs as root): a store this user may not read says "cannot read", not
    /// "cannot write … open the store read-only"; `recover --dry-run` of a store whose LOCK it may
    /// not read (but whose segments it may) runs without taking the lock.
    func testPermissionMessagesAsAnotherUser() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("needs root and setpriv(1) to run the tool as user 65534")
        }
        let dir = try store()
        let s = dir.appending("s")
        XCTAssertEqual(chmod(dir.path, 0o755), 0)
        func asNobody(_ arguments: [String]) throws -> (status: Int32, err: String) {
            let quoted = arguments.map { "'\($0)'" }.joined(separator: " ")
            return try shell("/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups '\(ToolTests.toolPath)' \(quoted)")
        }
        // The tool must be reachable by that user (a clone under a private home folder is not).
        let probe = try asNobody(["--help"])
        guard probe.status == 0 else { throw XCTSkip("user 65534 cannot run \(ToolTests.toolPath): \(probe.err)") }
        XCTAssertEqual(chmod(s, 0o700), 0)
        var run = try asNobody(["get", s, "k"])
        XCTAssertEqual(run.status, 1, run.err)
        XCTAssertEqual(run.err, "Error: cannot read \(s): Permission denied (errno 13); check its permissions (a store's files are readable by their owner only)\n")
        // Segments readable, LOCK not.
        XCTAssertEqual(chmod(s, 0o755), 0)
        for name in try FileManager.default.contentsOfDirectory(atPath: s) where name != "LOCK" {
            XCTAssertEqual(chmod(s + "/" + name, 0o644), 0)
        }
        run = try asNobody(["recover", s, "--dry-run"])
        XCTAssertEqual(run.status, 0, run.err)
    }
}
