import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Crash tests with real processes: `cask-crash-writer` writes to a store and logs every
/// acknowledged operation; the test SIGKILLs it at a random moment, reopens the store and checks
/// it against the log. Rounds chain on the same directory (a store recovered from one crash is
/// written and crashed again), with a fresh directory every ``roundsPerDirectory`` rounds.
///
/// `CASK_CRASH_ROUNDS` sets the number of rounds (default 30 for `os`/`fsync` mode, a third of
/// that for `buffered`); `CASK_TEST_SEED` replays a run.
final class CrashTests: XCTestCase {
    static let roundsPerDirectory = 10

    /// `os` mode (and every fourth round `fsync`): every acknowledged operation survives the kill.
    func testKilledWriterLosesNoAcknowledgedWrite() throws {
        let rounds = Self.rounds(default: 30)
        try runRounds(rounds, seedBase: 1, label: "os") { round in
            (round % 4 == 3 ? .fsync : .os, [1, 4, 2, 8][round % 4])
        }
    }

    /// `buffered` mode may lose an unflushed tail, but only a tail: each writer thread's keys must
    /// show a prefix of that thread's operations, and the store must open without damage.
    func testKilledBufferedWriterLosesOnlyATail() throws {
        let rounds = max(1, Self.rounds(default: 30) / 3)
        try runRounds(rounds, seedBase: 500_000, label: "buffered") { round in
            (.buffered, [1, 3, 8][round % 3])
        }
    }

    /// Killed while compactions run (on demand, and automatic): no acknowledged write lost, no
    /// deleted key back, no damage — whatever step of a compaction the kill lands in.
    func testKilledWriterDuringCompactionLosesNothing() throws {
        let rounds = max(1, Self.rounds(default: 30) / 2)
        try runRounds(rounds, seedBase: 900_000, label: "compacting", environment: ["CASK_CRASH_COMPACT": "1"]) { round in
            (round % 3 == 2 ? .fsync : .os, [1, 3, 8, 2, 5, 1][round % 6])
        }
    }

    /// An encrypted store, killed while compactions run, in every mode: no acknowledged write lost
    /// (a tail at most in `buffered` mode), no damage — every open that follows starts a segment
    /// of its own, so the tails a kill leaves are never sealed over.
    func testKilledEncryptedWriterLosesNothing() throws {
        let keyDirectory = TemporaryDirectory("cask-crash-key")
        defer { keyDirectory.remove() }
        let keyFile = keyDirectory.appending("key")
        try Data(EncryptionTests.key.hexKeyFile.utf8).write(to: URL(fileURLWithPath: keyFile))
        let rounds = max(1, Self.rounds(default: 30) / 3)
        try runRounds(
            rounds, seedBase: 1_300_000, label: "encrypted", environment: ["CASK_CRASH_COMPACT": "1", "CASK_CRASH_KEY_FILE": keyFile],
            encryption: .key(EncryptionTests.key)
        ) { round in
            ([.os, .fsync, .buffered][round % 3], [1, 3, 8, 2, 5][round % 5])
        }
    }

    /// The checker itself: it accepts exactly the states a crash can leave.
    func testCheckerRejectsLostResurrectedAndInventedWrites() throws {
        let dir = TemporaryDirectory("cask-ack-check")
        defer { dir.remove() }
        let path = dir.appending("ack")
        // Thread 0: put a v10, delete b v11 (both acknowledged), put a v12 in flight; a line cut short.
        try "S 1\nI 0 P a 10\nA 0 P a 10\nI 0 D b 11\nA 0 D b 11\nI 0 P a 12\nA 0 P".write(toFile: path, atomically: false, encoding: .utf8)
        let log = try AckLog(path: path)
        XCTAssertEqual(log.acknowledged, 2)
        func check(_ found: [String: [UInt8]], allAcknowledgedSurvive: Bool) -> [String] {
            var model: [String: UInt64] = ["b": 5]
            return log.check(found: found, model: &model, allAcknowledgedSurvive: allAcknowledgedSurvive)
        }
        let a10 = crashValue(key: "a", version: 10), a12 = crashValue(key: "a", version: 12), b5 = crashValue(key: "b", version: 5)
        // Every acknowledged operation, with or without the one in flight.
        XCTAssertEqual(check(["a": a10], allAcknowledgedSurvive: true), [])
        XCTAssertEqual(check(["a": a12], allAcknowledgedSurvive: true), [])
        // A lost put, a deleted key back, a value never written.
        XCTAssertFalse(check([:], allAcknowledgedSurvive: true).isEmpty)
        XCTAssertFalse(check(["a": a10, "b": b5], allAcknowledgedSurvive: true).isEmpty)
        XCTAssertFalse(check(["a": Array(a10.dropLast())], allAcknowledgedSurvive: true).isEmpty)
        XCTAssertFalse(check(["a": a10, "c": []], allAcknowledgedSurvive: true).isEmpty)
        // Buffered: any prefix, but only a prefix (a v12 without the delete of b before it is not one).
        XCTAssertEqual(check(["b": b5], allAcknowledgedSurvive: false), [])
        XCTAssertEqual(check(["a": a10, "b": b5], allAcknowledgedSurvive: false), [])
        XCTAssertEqual(check(["a": a12], allAcknowledgedSurvive: false), [])
        XCTAssertFalse(check(["a": a12, "b": b5], allAcknowledgedSurvive: false).isEmpty)
    }

    /// Two versions of a key can have the same value (about one put in 2001 is empty). The checker
    /// once took a found value for whichever matching version it met first, and reported acknowledged
    /// writes lost that were not (three times, in long runs): it must compare values.
    func testCheckerComparesValuesNotVersions() throws {
        // Per key: two versions with empty values (before the run, and the run's last put), and v1, not empty.
        let keys: [(key: String, before: UInt64, last: UInt64)] = [
            ("e0", 679, 3339), ("e1", 9810, 11148), ("e2", 1837, 4253), ("e3", 425, 3691),
            ("e4", 60, 138), ("e5", 999, 1132), ("e6", 695, 2596), ("e7", 2889, 5985),
        ]
        for (key, before, last) in keys {
            XCTAssertEqual(crashValue(key: key, version: before), [], key)
            XCTAssertEqual(crashValue(key: key, version: last), [], key)
            XCTAssertFalse(crashValue(key: key, version: 1).isEmpty, key)
        }
        let dir = TemporaryDirectory("cask-ack-check")
        defer { dir.remove() }
        let path = dir.appending("ack")
        func check(lines: [String], found: [String: [UInt8]]) throws -> (failures: [String], model: [String: UInt64]) {
            try (["S 1"] + lines).map { $0 + "\n" }.joined().write(toFile: path, atomically: false, encoding: .utf8)
            var model = Dictionary(uniqueKeysWithValues: keys.map { ($0.key, $0.before) })
            let failures = try AckLog(path: path).check(found: found, model: &model, allAcknowledgedSurvive: true)
            return (failures, model)
        }
        let empty = Dictionary(uniqueKeysWithValues: keys.map { ($0.key, [UInt8]()) })
        // Each key: put v1, then its empty last version. Empty is what must be found; a guess between
        // the two empty versions (8 keys: right every time with odds of 1 in 256) is not enough.
        let putOneThenLast = keys.flatMap { ["I 0 P \($0.key) 1", "A 0 P \($0.key) 1", "I 0 P \($0.key) \($0.last)", "A 0 P \($0.key) \($0.last)"] }
        let run = try check(lines: putOneThenLast, found: empty)
        XCTAssertEqual(run.failures, [])
        XCTAssertEqual(run.model, Dictionary(uniqueKeysWithValues: keys.map { ($0.key, $0.last) }))
        XCTAssertFalse(try check(lines: putOneThenLast, found: empty.mapValues { _ in [1] }).failures.isEmpty)
        // The other way round: the last put is v1, so an empty value is a lost write.
        let putLastThenOne = keys.flatMap { ["I 0 P \($0.key) \($0.last)", "A 0 P \($0.key) \($0.last)", "I 0 P \($0.key) 1", "A 0 P \($0.key) 1"] }
        XCTAssertEqual(try check(lines: putLastThenOne, found: empty).failures.count, keys.count)
        let ones = Dictionary(uniqueKeysWithValues: keys.map { ($0.key, crashValue(key: $0.key, version: 1)) })
        XCTAssertEqual(try check(lines: putLastThenOne, found: ones).failures, [])
    }

    // MARK: Rounds

    private func runRounds(
        _ rounds: Int, seedBase: UInt64, label: String, environment: [String: String] = [:], encryption: Encryption = .none,
        configuration: (Int) -> (Durability, Int)
    ) throws {
        let writer = try XCTUnwrap(Self.crashWriterPath(), "cask-crash-writer not found; looked in \(Self.crashWriterCandidates())")
        var random = SeededGenerator.fromEnvironment(fallback: UInt64(Date().timeIntervalSince1970 * 1000) % 1_000_000)
        print("CrashTests(\(label)): seed \(random.seed) (CASK_TEST_SEED=\(random.seed) replays the kill delays), \(rounds) rounds")
        var directory = TemporaryDirectory("cask-crash")
        var keepForInspection = false
        defer { if !keepForInspection { directory.remove() } }
        // CASK_CRASH_SNAPSHOTS=1: copy the store before each round, so that a failing round can be
        // replayed from the state it started from (kept, with its log, when the round fails).
        let snapshots = ProcessInfo.processInfo.environment["CASK_CRASH_SNAPSHOTS"] == "1"
        var model: [String: UInt64] = [:]  // key -> version of its value; absent keys are absent
        var totals = (acknowledged: 0, truncations: 0, killedBeforeOpen: 0)

        for round in 0..<rounds {
            if round > 0 && round % Self.roundsPerDirectory == 0 {
                directory.remove()
                directory = TemporaryDirectory("cask-crash")
                model = [:]
            }
            let (durability, threads) = configuration(round)
            // Seeds grow from round to round (and across runs do not collide within one directory),
            // so versions (seed << 32 | n) grow too.
            let seed = (seedBase + (random.seed % 1000) * 1000 + UInt64(round) + 1)
            let ackPath = directory.path + ".ack\(round)"
            defer { if !keepForInspection { try? FileManager.default.removeItem(atPath: ackPath) } }
            let snapshotPath = directory.path + ".before"
            if snapshots {
                try? FileManager.default.removeItem(atPath: snapshotPath)
                try FileManager.default.copyItem(atPath: directory.path, toPath: snapshotPath)
            }
            let delay = UInt32.random(in: 10_000...300_000, using: &random)

            let process = Process()
            process.executableURL = URL(fileURLWithPath: writer)
            process.arguments = [directory.path, ackPath, String(seed), durability.rawValue, String(threads)]
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            usleep(delay)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            guard process.terminationReason == .uncaughtSignal, process.terminationStatus == SIGKILL else {
                return XCTFail("round \(round): the writer exited by itself (status \(process.terminationStatus)): \(stderr)")
            }

            let log = try AckLog(path: ackPath)
            if !log.opened { totals.killedBeforeOpen += 1 }
            totals.acknowledged += log.acknowledged

            // Open must always succeed, and find no damage (a torn tail may be cut).
            let store: CaskStore
            do {
                var options = CaskStore.Options(durability: .os)
                options.encryption = encryption
                store = try CaskStore.open(at: directory.path, options: options)
            } catch {
                return XCTFail("round \(round) (\(durability), \(threads) threads, seed \(seed)): open failed: \(error)")
            }
            let report = store.recoveryReport
            XCTAssertEqual(report.damagedRanges, [], "round \(round): \(report)")
            totals.truncations += report.truncations.count

            var found: [String: [UInt8]] = [:]
            for key in try store.keys() {
                let text = String(decoding: key, as: UTF8.self)
                found[text] = try store.get(key)
                if found[text] == nil { XCTFail("round \(round): \(text) is listed but has no value") }
            }
            try store.close()

            let failures = log.check(found: found, model: &model, allAcknowledgedSurvive: durability != .buffered)
            for failure in failures.prefix(20) {
                XCTFail("round \(round) (\(durability), \(threads) threads, seed \(seed), killed after \(delay / 1000) ms): \(failure)")
            }
            if !failures.isEmpty {
                keepForInspection = true
                directory.keep()
                print("CrashTests(\(label)): kept the store \(directory.path), its log \(ackPath)"
                      + (snapshots ? " and the store before the round \(snapshotPath)" : ""))
                return
            }
        }
        print("CrashTests(\(label)): \(totals.acknowledged) acknowledged operations, \(totals.truncations) torn tails cut, "
              + "\(totals.killedBeforeOpen) rounds killed before the store was open")
        XCTAssertGreaterThan(totals.acknowledged, 0, "the writer never got to write: the test checked nothing")
    }

    static func rounds(default value: Int) -> Int {
        ProcessInfo.processInfo.environment["CASK_CRASH_ROUNDS"].flatMap { Int($0) } ?? value
    }

    // MARK: Finding the writer

    static func crashWriterCandidates() -> [String] {
        let name = "cask-crash-writer"
        var directories: [String] = []
        if let path = ProcessInfo.processInfo.environment["CASK_CRASH_WRITER"] { return [path] }
        // Linux: the test bundle is an executable in the products directory, next to the tools.
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append((executable as NSString).deletingLastPathComponent)
        }
        // Darwin: the .xctest bundle is a directory in the products directory.
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            directories.append((bundle.bundlePath as NSString).deletingLastPathComponent)
        }
        directories.append((Bundle.main.bundlePath as NSString).deletingLastPathComponent)
        if let first = CommandLine.arguments.first { directories.append((first as NSString).deletingLastPathComponent) }
        // The default scratch path of the package.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        directories += [".build/debug", ".build/release"].map { root.appendingPathComponent($0).path }
        return directories.map { $0 + "/" + name }
    }

    static func crashWriterPath() -> String? {
        crashWriterCandidates().first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// The acknowledgement log of one run of `cask-crash-writer` (format in its main.swift).
struct AckLog {
    struct Operation {
        var isPut: Bool
        /// The key, or (an atomic batch of puts) the keys, separated by commas.
        var key: String
        var version: UInt64
        var acknowledged: Bool
        /// The keys the operation sets: one, or all of a batch's.
        var keys: [String] { key.split(separator: ",").map(String.init) }
        /// The key's state once this operation is applied: the version of its value, or nil if deleted.
        var result: UInt64? { isPut ? version : nil }
    }

    /// Per writer thread, its operations in order; all acknowledged except perhaps the last.
    var threads: [Int: [Operation]] = [:]
    var opened = false
    var acknowledged = 0
    var problems: [String] = []

    /// An empty log.
    init() {}

    init(path: String) throws {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // empty after the final newline, or a line cut short by the kill
        for line in lines {
            let fields = line.split(separator: " ")
            if fields.first == "S" { opened = true; continue }
            guard fields.count == 5, let thread = Int(fields[1]), let version = UInt64(fields[4]) else {
                problems.append("bad log line \(line)")
                continue
            }
            let isPut = fields[2] == "P" || fields[2] == "B", key = String(fields[3])
            switch fields[0] {
            case "I":
                if threads[thread]?.last?.acknowledged == false { problems.append("thread \(thread) started two operations at once") }
                threads[thread, default: []].append(Operation(isPut: isPut, key: key, version: version, acknowledged: false))
            case "A":
                guard let last = threads[thread]?.last, !last.acknowledged, last.key == key, last.version == version else {
                    problems.append("acknowledgement without intent: \(line)")
                    continue
                }
                threads[thread]![threads[thread]!.count - 1].acknowledged = true
                acknowledged += 1
            default:
                problems.append("bad log line \(line)")
            }
        }
    }

    /// Checks the keys and values found after the crash against the log and `model` (each key's
    /// state before this run), then advances `model` to what was found.
    ///
    /// The store holds a prefix of each thread's operations (each key belongs to one thread, and
    /// a thread's operations are sequential). When `allAcknowledgedSurvive`, that prefix holds
    /// every acknowledged operation (and maybe the one in flight); otherwise it can be any prefix.
    /// Values are compared, not versions: two versions of a key can have the same value (0 to 2000
    /// bytes: about one put in 2001 is empty), and then either explains it. Returns the failures.
    func check(found: [String: [UInt8]], model: inout [String: UInt64], allAcknowledgedSurvive: Bool) -> [String] {
        var failures = problems
        var matching: [String: Set<UInt64>] = [:]  // key -> the versions whose value is the one found
        var keysOfThreads = Set<String>()
        for operations in threads.values { for operation in operations { keysOfThreads.formUnion(operation.keys) } }

        // Every value must be whole and one the writer wrote for that key.
        for (key, value) in found {
            var candidates = Set<UInt64>()
            if let before = model[key] { candidates.insert(before) }
            for operations in threads.values { for operation in operations where operation.isPut && operation.keys.contains(key) { candidates.insert(operation.version) } }
            let versions = candidates.filter { crashValue(key: key, version: $0) == value }
            if versions.isEmpty {
                failures.append("\(key) holds \(value.count) bytes that the writer never wrote for it")
                continue
            }
            matching[key] = versions
        }
        /// Whether `state` (a version, or nil for absent) is what was found for `key`.
        func explains(_ state: UInt64?, _ key: String) -> Bool {
            guard let state else { return found[key] == nil }
            return matching[key]?.contains(state) ?? false
        }
        func describe(_ key: String) -> String {
            guard found[key] != nil else { return "nothing" }
            guard let versions = matching[key] else { return "an unknown value" }
            return versions.sorted().map { "v\($0)" }.joined(separator: " or ")
        }

        var next = model
        for (thread, operations) in threads.sorted(by: { $0.key < $1.key }) {
            let acknowledged = operations.prefix { $0.acknowledged }.count
            let lowest = allAcknowledgedSurvive ? acknowledged : 0
            // Prefixes (number of operations applied) consistent with every key of this thread.
            var possible = Set(lowest...operations.count)
            let keys = Set(operations.flatMap(\.keys))
            for key in keys.sorted() {
                var consistent = Set<Int>()
                var current = model[key]  // state of the key after applying `length` operations
                for length in 0...operations.count {
                    // A batch sets all its keys in one operation: no prefix can hold only some of them.
                    if length > 0, operations[length - 1].keys.contains(key) { current = operations[length - 1].result }
                    if explains(current, key) { consistent.insert(length) }
                }
                let remaining = possible.intersection(consistent)
                if remaining.isEmpty {
                    let history = operations.enumerated().filter { $0.element.keys.contains(key) }
                        .map { "#\($0.offset) \($0.element.isPut ? "put" : "delete") v\($0.element.version)\($0.element.acknowledged ? "" : " (in flight)")" }
                    failures.append("""
                        thread \(thread), \(key): found \(describe(key)), which no allowed prefix \
                        (\(lowest)...\(operations.count) of \(operations.count) operations, \(acknowledged) acknowledged) explains; \
                        before this run: \(model[key].map { "v\($0)" } ?? "nothing"); last operations on it: \(history.suffix(8).joined(separator: ", "))
                        """)
                } else {
                    possible = remaining
                }
            }
            // The model goes on from the longest prefix that explains everything found.
            if let length = possible.max() {
                for key in keys {
                    var state = model[key]
                    for operation in operations.prefix(length) where operation.keys.contains(key) { state = operation.result }
                    next[key] = state
                }
            }
        }
        // Keys the writer did not touch in this run must be as they were.
        for key in Set(model.keys).union(found.keys) where !keysOfThreads.contains(key) {
            if !explains(model[key], key) {
                failures.append("\(key) was not written in this run but changed from \(model[key].map { "v\($0)" } ?? "nothing") to \(describe(key))")
            }
        }
        model = next
        return failures
    }
}
