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
        let run = try shell("yes | '\(ToolTests.toolPath)' put '\(dir.path)' k")
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
}
