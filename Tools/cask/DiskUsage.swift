import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The space a store directory really takes: allocated blocks, as `du` counts them.
enum DiskUsage {
    static func bytes(of directory: String) throws(ToolError) -> Int64 {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory) } catch {
            throw .failure("cannot list \(directory): \(error.localizedDescription)")
        }
        var total: Int64 = 0
        for name in names {
            var info = stat()
            if lstat(directory + "/" + name, &info) == 0 { total += Int64(info.st_blocks) * 512 }
        }
        return total
    }

    /// `12.3 MiB` style.
    static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}
