import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A command run to its end as a child process, timed from outside (the tool workloads): its wall
/// time from `posix_spawn` to `wait4`, and the kernel's accounting of its CPU time and peak RSS.
/// Standard input is `/dev/null`; standard output and standard error go to files.
struct ChildProcess {
    struct Outcome {
        /// The exit status, or 128 + the signal that ended it.
        var status: Int32
        var seconds: Double
        /// User + system CPU seconds.
        var cpuSeconds: Double
        var peakRSSKB: Int
    }

    /// Runs `executable` with `arguments`, writing its standard output to `stdoutPath` and its
    /// standard error to `stderrPath` (both truncated first).
    static func run(_ executable: String, _ arguments: [String], stdout stdoutPath: String, stderr stderrPath: String) throws -> Outcome {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let start = Clock.now()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw BenchError.check("cannot start \(executable): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw BenchError.check("waiting for \(executable): \(String(cString: strerror(errno)))") }
        }
        let seconds = Clock.now() - start
        func time(_ value: timeval) -> Double { Double(value.tv_sec) + Double(value.tv_usec) / 1e6 }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import as functions.
        let signal = status & 0x7F
        let exitStatus = signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        return Outcome(status: exitStatus, seconds: seconds, cpuSeconds: time(usage.ru_utime) + time(usage.ru_stime), peakRSSKB: usage.ru_maxrss)
    }

    /// The first executable file named `name` on `PATH`, nil if none.
    static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
