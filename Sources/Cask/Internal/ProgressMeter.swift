/// Turns bytes done into ``CaskStore/Progress`` reports for one phase: one when the distance
/// from the last report reaches 1% of `total` (and at least 1 MiB), and one at ``finish()``.
/// Every long call reports through it, so all of them report alike.
struct ProgressMeter {
    let phase: CaskStore.Progress.Phase
    var total: Int64
    let report: ((CaskStore.Progress) -> Void)?
    private(set) var done: Int64 = 0
    private var reported: Int64?

    init(phase: CaskStore.Progress.Phase, total: Int64, report: ((CaskStore.Progress) -> Void)?) {
        self.phase = phase
        self.total = total
        self.report = report
    }

    /// Reports `done` now, whatever was reported before.
    mutating func report(_ done: Int64) {
        self.done = done
        reported = done
        report?(CaskStore.Progress(phase: phase, done: done, total: total))
    }

    /// Reports where it stands, unless that was the last figure reported.
    mutating func finish() {
        if reported != done { report(done) }
    }

    mutating func advance(by count: Int64) {
        advance(to: done + count)
    }

    mutating func advance(to position: Int64) {
        done = position
        if done - (reported ?? 0) >= max(1 << 20, total / 100) { report(done) }
    }
}
