import Foundation

/// One measured result, printed as a RESULT line.
struct Measurement {
    var engine: String
    var workload: String
    var mode: String
    var num: Int
    var valueSize: Int
    var seconds: Double
    var bytes: Int
    var diskBytes: Int64
    var rssKB: Int
    var extra: [(String, String)] = []

    var opsPerSecond: Double { Double(num) / seconds }
    var megabytesPerSecond: Double { Double(bytes) / seconds / 1_048_576 }

    var line: String {
        var text = "RESULT engine=\(engine) workload=\(workload) mode=\(mode) num=\(num) value_size=\(valueSize)"
        text += " ops_per_s=\(String(format: "%.0f", opsPerSecond)) mb_per_s=\(String(format: "%.2f", megabytesPerSecond))"
        text += " disk_bytes=\(diskBytes) rss_kb=\(rssKB)"
        for (key, value) in extra { text += " \(key)=\(value)" }
        return text
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

enum ProcessStats {
    /// Resident set size now, and its peak, in KiB (from /proc/self/status).
    static func rss() -> (current: Int, peak: Int) {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Int {
            for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
                return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
            }
            return 0
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// Bytes of all regular files in a directory (allocated blocks, as `du` counts them).
    static func diskBytes(_ directory: String) -> Int64 {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        var total: Int64 = 0
        for name in names {
            var info = stat()
            if stat(directory + "/" + name, &info) == 0 { total += Int64(info.st_blocks) * 512 }
        }
        return total
    }
}
