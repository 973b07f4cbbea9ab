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
}
