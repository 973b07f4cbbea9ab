// cask-crash-writer: the child process of the crash tests (Tests/CaskTests/CrashTests.swift).
//
// It opens a store, writes until it is killed, and logs what it does to an acknowledgement log so
// that the test can check the store after a SIGKILL at a random moment. Each thread owns its own
// keys, so on any key the operations are sequential and the log orders them exactly.
//
// Log lines (one write(2) each, O_APPEND, so a line is never interleaved with another):
//   S <pid>                       the store is open
//   I <thread> <P|D> <key> <ver>  an operation is about to start ("intent")
//   A <thread> <P|D> <key> <ver>  the operation returned (acknowledged), logged before the next one
//   I/A <thread> B <k1,k2,k3> <ver>  the same for an atomic batch putting version <ver> to 3 keys
// The value of a put is `crashValue(key:version:)`, recomputed by the checker; versions are
// `SEED << 32 | n`, unique across runs that use different seeds and growing with the seed.
#if canImport(Glibc)
import Glibc
#endif
import Cask
import CaskTestSupport
import Foundation

enum CrashWriter {
    static let usage = """
        OVERVIEW: Writes to a Cask store until killed, logging every acknowledged operation.

        USAGE: cask-crash-writer <dir> <acklog> <seed> <mode> [<threads>]

        ARGUMENTS:
          <dir>       The store directory (created if missing).
          <acklog>    The acknowledgement log, appended to.
          <seed>      Random seed, 1 to 4294967295; versions are seed << 32 | n.
          <mode>      Durability: os, fsync or buffered.
          <threads>   Writer threads, 1 to 64 (default 1).

        ENVIRONMENT:
          CASK_CRASH_COMPACT=1  Also compact all the time, from one more thread, and let the
                                automatic compaction run at low thresholds.
          CASK_CRASH_KEY_FILE=<path>  Open the store encrypted, with the key in this key file.
        """

    static func run() -> Never {
        let arguments = CommandLine.arguments
        guard arguments.count == 5 || arguments.count == 6 else { usageError("expected 4 or 5 arguments") }
        let directory = arguments[1], ackPath = arguments[2]
        guard let seed = UInt64(arguments[3]), seed > 0, seed <= UInt64(UInt32.max) else { usageError("bad seed \(arguments[3])") }
        guard let durability = Durability(rawValue: arguments[4]) else { usageError("bad mode \(arguments[4])") }
        let threads = arguments.count == 6 ? Int(arguments[5]) ?? 0 : 1
        guard (1...64).contains(threads) else { usageError("bad thread count \(arguments[5])") }

        let ackFD = Glibc.open(ackPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard ackFD >= 0 else { fail("cannot open \(ackPath): \(String(cString: strerror(errno)))") }

        var options = CaskStore.Options(durability: durability)
        options.maxSegmentSize = 64 << 10  // rotations every few dozen puts
        options.bufferSize = 16 << 10
        let compacting = ProcessInfo.processInfo.environment["CASK_CRASH_COMPACT"] == "1"
        if compacting {
            options.compactionDeadRatio = 0.2
            options.compactionMinDeadBytes = 0
        }
        if let keyFile = ProcessInfo.processInfo.environment["CASK_CRASH_KEY_FILE"] {
            do { options.encryption = .key(try EncryptionKey(keyFile: keyFile)) } catch { fail("\(error)") }
        }
        let store: CaskStore
        do {
            store = try CaskStore.open(at: directory, options: options)
        } catch {
            fail("open failed: \(error)")
        }
        log(ackFD, "S \(getpid())")

        for thread in 0..<threads {
            let worker = Thread {
                writeForever(store: store, thread: thread, seed: seed, ackFD: ackFD)
            }
            worker.start()
        }
        if compacting {
            Thread {
                while true {
                    do { try store.compact() } catch { fail("compact failed: \(error)") }
                    usleep(2_000)
                }
            }.start()
        }
        // Exit if the parent test process goes away, so that no writer outlives a crashed test.
        let parent = getppid()
        let deadline = Date().addingTimeInterval(120)
        while getppid() == parent && Date() < deadline { usleep(20_000) }
        exit(3)
    }

    static func writeForever(store: CaskStore, thread: Int, seed: UInt64, ackFD: Int32) -> Never {
        let failure = CrashWorkload.write(store, thread: thread, seed: seed, log: { log(ackFD, $0) })
        fail(failure.map { "\($0.operation) failed: \($0.error)" } ?? "the workload stopped")
    }

    /// Appends one line with a single write(2).
    static func log(_ fd: Int32, _ line: String) {
        let bytes = Array((line + "\n").utf8)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if written != bytes.count { fail("cannot write the acknowledgement log: \(String(cString: strerror(errno)))") }
    }

    static func usageError(_ message: String) -> Never {
        FileHandle.standardError.write(Data("Error: \(message)\n\n\(usage)\n".utf8))
        exit(64)
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("Error: \(message)\n".utf8))
        exit(1)
    }
}

CrashWriter.run()
