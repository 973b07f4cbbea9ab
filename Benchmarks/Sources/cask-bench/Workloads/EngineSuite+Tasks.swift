// Cask's durable writes from Swift tasks: `fillsync_tasks` (`store.suspending`) against
// `fillsync_tasks_blocking` (the blocking `put` called from the same tasks).
import Cask
import Dispatch
import Foundation
import Synchronization

extension EngineSuite {
    /// How many tasks write at once in `fillsync_tasks`.
    static var writingTasks: Int { 1_000 }

    /// `fillSyncCount` durable puts of new keys from ``writingTasks`` tasks at once, each task's
    /// puts one after another, while a probe task sleeps 1 ms at a time and records how late it
    /// wakes: the probe stands for the rest of a service's tasks, which share the cooperative pool
    /// (one thread per core) with the writers. Run once with `store.suspending.put` and once with
    /// the blocking `put`, in an order that alternates with the run number (for the counts, see
    /// below); reports throughput, the
    /// puts' latency and the probe's overruns (`probe_p50_ms`, `probe_p99_ms`, `probe_max_ms`).
    func taskFillSync() throws {
        let variants = [("fillsync_tasks", true), ("fillsync_tasks_blocking", false)]
        for (workload, suspending) in run % 2 == 0 ? variants : variants.reversed() where wanted(workload) {
            try taskFillSync(workload, suspending: suspending)
        }
    }

    private func taskFillSync(_ workload: String, suspending: Bool) throws {
        let dir = directory(workload, .sync)
        let store = try CaskEngine(directory: dir, mode: .sync).store
        let tasks = Self.writingTasks
        // Ten times `fillsync`'s puts when they suspend (a third of a second on a 2-core machine,
        // for a few hundred of the probe's sleeps); with blocking puts, `fillsync`'s count: the
        // pool's threads wait for the disk by turns, and that takes 20 times longer.
        let perTask = max(1, fillSyncCount * (suspending ? 10 : 1) / tasks)
        let total = perTask * tasks
        let data = data
        let outcome = Mutex<(latencies: [Double], overruns: [Double])>(([], []))
        var measurement = try measure(workload, mode: "sync", num: total, bytes: data.userBytes(total), directory: dir,
                                      extra: [("tasks", "\(tasks)")], printing: false) {
            try Self.waitForTask {
                let writing = Atomic(true)
                async let overruns = Self.probeOverruns(while: { writing.load(ordering: .relaxed) })
                let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
                    for task in 0..<tasks {
                        group.addTask {
                            let key = KeyBuffer()
                            var latencies = [Double](repeating: 0, count: perTask)
                            for n in 0..<perTask {
                                let i = task * perTask + n
                                let start = Clock.now()
                                if suspending {
                                    try await store.suspending.put(key.key(i), data.value(i))
                                } else {
                                    try store.put(key.key(i), data.value(i))
                                }
                                latencies[n] = Clock.now() - start
                            }
                            return latencies
                        }
                    }
                    return try await group.reduce(into: [Double]()) { $0 += $1 }
                }
                writing.store(false, ordering: .relaxed)
                let probe = await overruns
                outcome.withLock { $0 = (latencies, probe) }
            }
        }
        let (latencies, overruns) = outcome.withLock { ($0.latencies.sorted(), $0.overruns.sorted()) }
        func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
            sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
        }
        measurement.extra += [
            ("p50_us", String(format: "%.0f", percentile(latencies, 0.5) * 1e6)),
            ("p99_us", String(format: "%.0f", percentile(latencies, 0.99) * 1e6)),
            ("probe_sleeps", "\(overruns.count)"),
            ("probe_p50_ms", String(format: "%.3f", percentile(overruns, 0.5) * 1e3)),
            ("probe_p99_ms", String(format: "%.3f", percentile(overruns, 0.99) * 1e3)),
            ("probe_max_ms", String(format: "%.3f", (overruns.last ?? 0) * 1e3)),
        ]
        emit(measurement)
        try store.close()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Sleeps 1 ms at a time while `running()` holds; returns by how much each sleep overran (s).
    private static func probeOverruns(while running: @escaping @Sendable () -> Bool) async -> [Double] {
        var overruns: [Double] = []
        while running() {
            let start = Clock.now()
            try? await Task.sleep(for: .milliseconds(1))
            overruns.append(max(0, Clock.now() - start - 0.001))
        }
        return overruns
    }

    /// Runs `body` in a task and blocks the calling thread (the benchmark's main thread, not one of
    /// the cooperative pool's) until it ends.
    private static func waitForTask(_ body: @escaping @Sendable () async throws -> Void) throws {
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<(any Error)?>(nil)
        Task {
            do { try await body() } catch { failure.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
