import Foundation

/// One measured result: a RESULT line, printed by the worker and parsed back by the coordinator.
///
///     RESULT engine=<name> workload=<name> mode=<mode> num=<n> value_size=<n> ops_per_s=<x>
///            mb_per_s=<x> disk_bytes=<n> rss_kb=<n> [key=value ...]
struct Measurement: Sendable {
    var engine: String
    var workload: String
    var mode: String
    var num: Int
    var valueSize: Int
    var opsPerSecond: Double
    var megabytesPerSecond: Double
    var diskBytes: Int64
    var rssKB: Int
    /// Extra `key=value` fields, in order (e.g. `writers=16`, `seconds=0.212`).
    var extra: [(String, String)] = []

    init(engine: String, workload: String, mode: String, num: Int, valueSize: Int, seconds: Double, bytes: Int,
         diskBytes: Int64, rssKB: Int, extra: [(String, String)] = []) {
        self.engine = engine
        self.workload = workload
        self.mode = mode
        self.num = num
        self.valueSize = valueSize
        self.opsPerSecond = seconds > 0 ? Double(num) / seconds : 0
        self.megabytesPerSecond = seconds > 0 ? Double(bytes) / seconds / 1_048_576 : 0
        self.diskBytes = diskBytes
        self.rssKB = rssKB
        self.extra = extra
    }

    subscript(field: String) -> String? { extra.first { $0.0 == field }?.1 }

    /// What identifies a result across runs: everything but the figures.
    var series: Series { Series(engine: engine, workload: workload, mode: mode, writers: Int(self["writers"] ?? "") ?? 1) }

    var line: String {
        var text = "RESULT engine=\(engine) workload=\(workload) mode=\(mode) num=\(num) value_size=\(valueSize)"
        text += " ops_per_s=\(String(format: "%.0f", opsPerSecond)) mb_per_s=\(String(format: "%.2f", megabytesPerSecond))"
        text += " disk_bytes=\(diskBytes) rss_kb=\(rssKB)"
        for (key, value) in extra { text += " \(key)=\(value)" }
        return text
    }

    /// Parses a RESULT line; nil for any other line.
    init?(line: String) {
        let words = line.split(separator: " ")
        guard words.first == "RESULT" else { return nil }
        var fields: [(String, String)] = []
        for word in words.dropFirst() {
            guard let equals = word.firstIndex(of: "=") else { return nil }
            fields.append((String(word[..<equals]), String(word[word.index(after: equals)...])))
        }
        func take(_ name: String) -> String? {
            guard let index = fields.firstIndex(where: { $0.0 == name }) else { return nil }
            return fields.remove(at: index).1
        }
        guard let engine = take("engine"), let workload = take("workload"), let mode = take("mode"),
              let num = take("num").flatMap({ Int($0) }), let valueSize = take("value_size").flatMap({ Int($0) }),
              let ops = take("ops_per_s").flatMap({ Double($0) }), let mb = take("mb_per_s").flatMap({ Double($0) }),
              let disk = take("disk_bytes").flatMap({ Int64($0) }), let rss = take("rss_kb").flatMap({ Int($0) })
        else { return nil }
        self.engine = engine
        self.workload = workload
        self.mode = mode
        self.num = num
        self.valueSize = valueSize
        self.opsPerSecond = ops
        self.megabytesPerSecond = mb
        self.diskBytes = disk
        self.rssKB = rss
        self.extra = fields
    }
}

/// One engine's workload in one mode (and writer count): the unit a median is taken over.
struct Series: Hashable, Sendable, Comparable {
    var engine: String
    var workload: String
    var mode: String
    var writers: Int

    static func < (a: Series, b: Series) -> Bool {
        (a.workload, a.mode, a.writers, a.engine) < (b.workload, b.mode, b.writers, b.engine)
    }
}

enum Clock {
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func time(_ body: () throws -> Void) rethrows -> Double {
        let start = now()
        try body()
        return now() - start
    }
}
