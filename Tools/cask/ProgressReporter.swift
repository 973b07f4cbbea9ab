import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Progress of a long command on standard error: a redrawn bar with rate and ETA on a terminal,
/// a plain line at every 10% otherwise (logs, pipes, CI).
final class ProgressReporter {
    /// What the numbers count: bytes (`1.5 MiB of 3.0 MiB, 12.0 MiB/s`), or items such as keys
    /// (`1200 of 5000 keys, 8000 keys/s`).
    enum Unit {
        case bytes
        case items(String)

        func amounts(_ done: Int64, of total: Int64) -> String {
            switch self {
            case .bytes: "\(DiskUsage.format(done)) of \(DiskUsage.format(total))"
            case .items(let name): "\(done) of \(total) \(name)"
            }
        }

        func rate(_ perSecond: Int64) -> String {
            switch self {
            case .bytes: "\(DiskUsage.format(perSecond))/s"
            case .items(let name): "\(perSecond) \(name)/s"
            }
        }
    }

    private let label: String
    private let output: Output
    private let unit: Unit
    private let isTerminal = isatty(2) == 1
    private let started = Date()
    private var lastTenth = -1
    private var drewBar = false
    /// When the bar was last drawn (seconds since `started`): it is redrawn at most 10 times a second.
    private var drawnAt: TimeInterval = -1

    init(label: String, output: Output, unit: Unit = .bytes) {
        self.label = label
        self.output = output
        self.unit = unit
    }

    func update(_ done: Int64, of total: Int64) {
        guard total > 0 else { return }
        let fraction = min(1, Double(done) / Double(total))
        let elapsed = Date().timeIntervalSince(started)
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 ? Double(total - done) / rate : 0
        // The rate is formatted only for a line that is printed: callers update once per item.
        if isTerminal {
            guard elapsed - drawnAt >= 0.1 || done >= total else { return }
            drawnAt = elapsed
            let speed = unit.rate(Int64(rate))
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            output.error(String(format: "\r%@ [%@] %3.0f%% %@ ETA %.0fs ", label, bar, fraction * 100, speed, eta))
            drewBar = true
        } else {
            let tenth = Int(fraction * 10)
            guard tenth > lastTenth else { return }
            lastTenth = tenth
            let speed = unit.rate(Int64(rate))
            output.error(String(format: "%@: %.0f%% (%@, %@)\n", label, fraction * 100, unit.amounts(done, of: total), speed))
        }
    }

    func finish() {
        if drewBar { output.error("\n") }
    }
}
