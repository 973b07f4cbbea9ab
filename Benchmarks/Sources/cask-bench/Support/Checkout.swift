import Foundation

/// The git checkout the benchmark runs from.
enum Checkout {
    /// HEAD's short hash (`68d5723`), with `+dirty` when tracked files have uncommitted changes
    /// (outside `results/`, which the runs themselves change); empty when `directory` (the
    /// benchmark package's) is not in a git checkout or git is not installed.
    static func commit(of directory: String) -> String {
        guard let head = git(["rev-parse", "--short=7", "HEAD"], in: directory), !head.isEmpty else { return "" }
        let changes = git(["status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(exclude)results"], in: directory) ?? ""
        return head + (changes.isEmpty ? "" : "+dirty")
    }

    /// git's standard output, trimmed; nil when it cannot run or fails.
    private static func git(_ arguments: [String], in directory: String) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-C", directory] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
