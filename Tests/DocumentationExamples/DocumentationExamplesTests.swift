import CaskTestSupport
import Foundation
import XCTest

/// The generated example tests (Generated/) must be what Tools/extract-examples.py makes of the docs
/// as they are now, so that no change to an example in README.md or docs/ goes untested.
final class DocumentationExamplesTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func testGeneratedExamplesMatchTheDocs() throws {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        guard let python = path.split(separator: ":").map({ "\($0)/python3" })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else {
            return XCTFail("python3 is not installed (not found on PATH): this test runs Tools/extract-examples.py --check with it. Install Python 3 (CI machines have it).")
        }
        let scratch = TemporaryDirectory("cask-examples-check")
        defer { scratch.remove() }
        let outPath = scratch.appending("output")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        let output = try XCTUnwrap(FileHandle(forWritingAtPath: outPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.root + "/Tools/extract-examples.py", "--check"]
        process.standardOutput = output
        process.standardError = output
        try process.run()
        process.waitUntilExit()
        try output.close()
        let text = try String(contentsOfFile: outPath, encoding: .utf8)
        XCTAssertEqual(process.terminationStatus, 0, "Tools/extract-examples.py --check: \(text)")
    }
}
