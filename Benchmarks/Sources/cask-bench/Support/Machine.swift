import Foundation

/// What the report says about the machine the numbers come from.
struct Machine: Sendable {
    var cores: Int
    var cpuModel: String
    var kernel: String
    var memory: String
    var dataDirectory: String
    var fileSystem: String
    var loadAverage: String

    static func describe(dataDirectory: String) -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last!.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        let memKB = meminfo.split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") } ?? 0
        let load = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "")
            .split(separator: " ").prefix(3).joined(separator: " ")
        return Machine(
            cores: sysconf(Int32(_SC_NPROCESSORS_ONLN)), cpuModel: model, kernel: "Linux " + release,
            memory: String(format: "%.1f GiB", Double(memKB) / 1_048_576), dataDirectory: dataDirectory,
            fileSystem: fileSystem(of: dataDirectory), loadAverage: load)
    }

    /// The type and device of the mount holding `path` (the longest matching /proc/mounts entry).
    static func fileSystem(of path: String) -> String {
        let resolved = (path as NSString).resolvingSymlinksInPath
        let mounts = (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? ""
        var best: (point: String, description: String)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 4 else { continue }
            let point = String(fields[1])
            let inside = point == "/" || resolved == point || resolved.hasPrefix(point + "/")
            if inside && point.count >= (best?.point.count ?? -1) {
                let options = fields[3].split(separator: ",").filter { ["rw", "ro", "relatime", "noatime"].contains($0) }
                best = (point, "\(fields[2]) on \(fields[0]) mounted at \(point) (\(options.joined(separator: ",")))")
            }
        }
        return best?.description ?? "unknown"
    }

    /// The CSV's `machine`: "Intel(R) Xeon(R) Processor (2 cores)".
    var summary: String { Self.summary(cpuModel: cpuModel, cores: cores) }

    static func summary(cpuModel: String, cores: Int) -> String { "\(cpuModel) (\(cores) cores)" }

    var lines: [String] {
        [
            "CPU: \(cpuModel), \(cores) cores online (nproc)",
            "Memory: \(memory)",
            "Kernel: \(kernel)",
            "Data directory: \(dataDirectory) — \(fileSystem)",
            "Load average when the suite started: \(loadAverage)",
        ]
    }
}
