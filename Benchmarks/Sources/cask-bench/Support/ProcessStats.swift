import CAllocationCounter
import Foundation

enum ProcessStats {
    /// Resident set size now, and its peak since the last ``resetPeak()``, in KiB (/proc/self/status).
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

    /// Starts a new peak-RSS window: gives freed heap back to the kernel, then resets VmHWM to the
    /// current RSS (Linux: writing 5 to /proc/self/clear_refs).
    static func resetPeak() {
        cask_release_free_memory()
        if let file = fopen("/proc/self/clear_refs", "w") {
            fputs("5", file)
            fclose(file)
        }
    }

    /// Bytes allocated on disk (as `du` counts them) by every regular file under `directory`.
    static func diskBytes(_ directory: String) -> Int64 {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return 0 }
        var total: Int64 = 0
        while let name = walker.nextObject() as? String {
            var info = stat()
            if lstat(directory + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
                total += Int64(info.st_blocks) * 512
            }
        }
        return total
    }
}
