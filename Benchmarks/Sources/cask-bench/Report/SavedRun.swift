import Foundation

/// A report folder `MarkdownReport` wrote, read back for `--csv-from`: the RESULT lines of its
/// results.txt, and from the first lines of its report.md the date, the command line (parsed again
/// for num, runs and the run kind), the CPU line and the commit.
struct SavedRun {
    /// What precedes the commit on the report's command line: "`cask-bench …` at commit `68d5723` — …".
    static let commitMarker = "at commit "

    let results: ResultSet
    let options: BenchOptions
    let run: HeadlineCSV.Run
    /// headlines.csv beside the folder, in the results directory holding it.
    let defaultCSV: String

    /// `commit` names the run's commit when the report does not (reports written before it said).
    init(folder: String, commit: String?) throws {
        let url = URL(fileURLWithPath: folder).standardizedFileURL
        let resultsPath = url.appendingPathComponent("results.txt").path
        let reportPath = url.appendingPathComponent("report.md").path

        var results = ResultSet()
        for line in try Self.read(resultsPath).split(separator: "\n") {
            if let measurement = Measurement(line: String(line)) { results.add(measurement) }
        }

        let report = try Self.read(reportPath).split(separator: "\n").map(String.init)
        let titlePrefix = "# Cask benchmark — "
        guard let title = report.first, title.hasPrefix(titlePrefix) else {
            throw FileError(path: reportPath, what: "does not start with \"\(titlePrefix)<date>\": it is not a report cask-bench wrote")
        }
        guard let command = report.first(where: { $0.hasPrefix("`cask-bench") }),
              let end = command.dropFirst().firstIndex(of: "`") else {
            throw FileError(path: reportPath, what: "has no `cask-bench …` line, so the run's options are unknown")
        }
        let arguments = command[command.index(after: command.startIndex)..<end].split(separator: " ").dropFirst().map(String.init)
        do { options = try BenchOptions.parse(arguments) } catch {
            throw FileError(path: reportPath, what: "names options this cask-bench does not take (\(error))")
        }
        let written = command.range(of: Self.commitMarker + "`").flatMap { start in
            command[start.upperBound...].firstIndex(of: "`").map { String(command[start.upperBound..<$0]) }
        }

        // "- CPU: Intel(R) Xeon(R) Processor, 2 cores online (nproc)", as Machine.lines writes it.
        let cpuPrefix = "- CPU: "
        guard let cpu = report.first(where: { $0.hasPrefix(cpuPrefix) }).map({ $0.dropFirst(cpuPrefix.count) }),
              let coresEnd = cpu.range(of: " cores online", options: .backwards),
              let comma = cpu[..<coresEnd.lowerBound].range(of: ", ", options: .backwards),
              let cores = Int(cpu[comma.upperBound..<coresEnd.lowerBound]) else {
            throw FileError(path: reportPath, what: "has no \"\(cpuPrefix)<model>, <n> cores online\" line, so the machine is unknown")
        }

        self.results = results
        run = HeadlineCSV.Run(
            date: String(title.dropFirst(titlePrefix.count)), name: url.lastPathComponent, commit: commit ?? written ?? "",
            kind: options.runKind, machine: Machine.summary(cpuModel: String(cpu[..<comma.lowerBound]), cores: cores),
            num: options.num, runs: options.runs)
        defaultCSV = url.deletingLastPathComponent().appendingPathComponent("headlines.csv").path
    }

    private static func read(_ path: String) throws -> String {
        do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw FileError(path: path, what: "cannot be read (\(error.localizedDescription)); --csv-from takes a report folder cask-bench wrote")
        }
    }
}
