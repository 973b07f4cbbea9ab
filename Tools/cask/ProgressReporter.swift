import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Progress of a long command on standard error: a redrawn bar with rate and ETA on a terminal,
/// a plain line at every 10% otherwise (logs, pipes, CI).
final class ProgressReporter {
    private let label: String
    private let output: Output
    private let isTerminal = isatty(2) == 1
    private let started = Date()
    private var lastTenth = -1
    private var drewBar = false

    init(label: String, output: Output) {
        self.label = label
        self.output = output
    }

    func update(_ done: Int64, of total: Int64) {
        guard total > 0 else { return }
        let fraction = min(1, Double(done) / Double(total))
        let elapsed = Date().timeIntervalSince(started)
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 ? Double(total - done) / rate : 0
        let speed = "\(DiskUsage.format(Int64(rate)))/s"
        if isTerminal {
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            output.error(String(format: "\r%@ [%@] %3.0f%% %@ ETA %.0fs ", label, bar, fraction * 100, speed, eta))
            drewBar = true
        } else {
            let tenth = Int(fraction * 10)
            guard tenth > lastTenth else { return }
            lastTenth = tenth
            output.error(String(format: "%@: %.0f%% (%@ of %@, %@)\n", label, fraction * 100,
                                DiskUsage.format(done), DiskUsage.format(total), speed))
        }
    }

    func finish() {
        if drewBar { output.error("\n") }
    }
}
