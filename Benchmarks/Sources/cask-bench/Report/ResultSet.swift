/// All measurements of a suite, grouped by series, with medians over the runs.
struct ResultSet: Sendable {
    private(set) var measurements: [Series: [Measurement]] = [:]
    /// Series in the order they first appeared.
    private(set) var order: [Series] = []
    /// Raw RESULT lines, in order.
    private(set) var lines: [String] = []
    /// Workers that failed: "engine run N: message".
    var failures: [String] = []

    mutating func add(_ measurement: Measurement) {
        let series = measurement.series
        if measurements[series] == nil { order.append(series) }
        measurements[series, default: []].append(measurement)
        lines.append(measurement.line)
    }

    func summary(_ series: Series) -> Summary? {
        guard let runs = measurements[series], !runs.isEmpty else { return nil }
        return Summary(runs: runs)
    }

    func summary(_ engine: String, _ workload: String, _ mode: String, writers: Int = 1) -> Summary? {
        summary(Series(engine: engine, workload: workload, mode: mode, writers: writers))
    }

    /// The distinct (workload, mode, writers) groups, in first-seen order, engines aside.
    var groups: [Series] {
        var seen = Set<Series>()
        var groups: [Series] = []
        for series in order {
            let group = Series(engine: "", workload: series.workload, mode: series.mode, writers: series.writers)
            if seen.insert(group).inserted { groups.append(group) }
        }
        return groups
    }

    /// The engines of `group` in report order: the key-value engines, then the objects variants and coders.
    func engines(in group: Series) -> [String] {
        let present = Set(order.filter { $0.workload == group.workload && $0.mode == group.mode && $0.writers == group.writers }.map(\.engine))
        var seen = Set<String>()
        return Self.engineOrder.filter { present.contains($0) && seen.insert($0).inserted }
    }

    static let engineOrder = Engines.all.map { $0.name } + ObjectVariant.all.map(\.name) + ObjectsSuite.coderNames
}

/// The runs of one series: the median run (by ops/s; for an even number of runs the upper of the
/// two middle ones), and the range.
struct Summary: Sendable {
    let runs: [Measurement]
    let median: Measurement
    let minimum: Double
    let maximum: Double

    init(runs: [Measurement]) {
        let sorted = runs.sorted { $0.opsPerSecond < $1.opsPerSecond }
        self.runs = runs
        median = sorted[sorted.count / 2]
        minimum = sorted.first!.opsPerSecond
        maximum = sorted.last!.opsPerSecond
    }

    var opsPerSecond: Double { median.opsPerSecond }

    /// The median of a numeric extra field (e.g. `seconds`, `allocs_per_op`).
    func median(of field: String) -> Double? {
        let values = runs.compactMap { $0[field].flatMap(Double.init) }.sorted()
        return values.isEmpty ? nil : values[values.count / 2]
    }

    func range(of field: String) -> (Double, Double)? {
        let values = runs.compactMap { $0[field].flatMap(Double.init) }.sorted()
        return values.isEmpty ? nil : (values.first!, values.last!)
    }
}
