import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Power cuts, simulated through the file-system seam with ``PowerLossFileSystem``: a scenario of
/// puts, overwrites, deletes, batches, syncs, compactions and reopens runs on a store with 4 KiB
/// segments; the power is cut at one I/O call (every call of the short scenarios, random ones of the
/// long ones); the disk as it may be after the cut is written into fresh directories — only what was
/// synced, everything written, each file keeping a random torn part of its unsynced writes, and all
/// writes cut at one random point of their order — and each is reopened with the real file system:
///
/// - `.fsync`: the store holds exactly the writes that returned, plus possibly the one in progress
///   at the cut (a batch wholly or not at all): no acknowledged write lost, no delete undone.
/// - `.os`, `.buffered`: the store holds the state after some prefix of the writes, at least up to
///   the last `sync()` or `close()` that returned. When files keep their unsynced writes
///   independently, each key holds a value it had after such a prefix (see ``check``).
/// - In every mode: the store opens; once that open has cut what the crash tore, its recovery
///   report lists no damage and `verify` finds no problem and no invalid hint (in `.os` and
///   `.buffered` modes, except a torn tail of a sealed segment: see ``isAllowedDamage``); a write,
///   a close and a reopen work, with nothing more to cut.
///
/// `CASK_POWERLOSS_SEEDS=n` runs `n` long random scenarios per durability mode (default 12) and
/// `n / 2` first cuts per mode before a second one; `CASK_TEST_SEED=n` starts the scenarios' seeds
/// at `n`; `CASK_KEEP_TEST_DIRS=1` keeps the directories.
final class PowerLossTests: XCTestCase {
    /// The tests write thousands of small stores: in memory (`/dev/shm`) when there is one, so that
    /// other work on the disk does not slow them down. The power cut is simulated, not the disk.
    static let memoryBacked: String? = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : nil

    static let seeds = ProcessInfo.processInfo.environment["CASK_POWERLOSS_SEEDS"].flatMap { Int($0) } ?? 12

    // MARK: Scenarios

    enum Step: CustomStringConvertible {
        case put(String, [UInt8])
        case delete(String)
        case batch([(key: String, value: [UInt8]?)])
        case sync
        case compact
        case reopen

        var description: String {
            switch self {
            case .put(let key, let value): "put \(key) (\(value.count) bytes)"
            case .delete(let key): "delete \(key)"
            case .batch(let operations): "batch [\(operations.map { "\($0.value == nil ? "delete" : "put") \($0.key)" }.joined(separator: ", "))]"
            case .sync: "sync"
            case .compact: "compact"
            case .reopen: "reopen"
            }
        }

        func apply(to content: inout [String: [UInt8]]) {
            switch self {
            case .put(let key, let value): content[key] = value
            case .delete(let key): content[key] = nil
            case .batch(let operations): for (key, value) in operations { content[key] = value }
            case .sync, .compact, .reopen: break
            }
        }
    }

    struct Scenario: CustomStringConvertible {
        var name: String
        var durability: Durability
        var writeHints = true
        var memoryMapping = true
        var automaticCompaction = true
        var dictionaries = DictionaryOptions()
        var encryption = Encryption.none
        /// The store's content before the first step (the template's, if there is one).
        var base: [String: [UInt8]] = [:]
        var steps: [Step]

        var description: String { "\(name) (\(durability))" }

        /// `states[i]`: the content after the first `i` steps.
        var states: [[String: [UInt8]]] {
            var content = base
            var states = [content]
            for step in steps {
                step.apply(to: &content)
                states.append(content)
            }
            return states
        }

        func options(_ fileSystem: (any FileSystem)? = nil) -> CaskStore.Options {
            var options = CaskStore.Options(durability: durability)
            if let fileSystem { options.fileSystem = fileSystem }
            options.maxSegmentSize = 4096
            options.bufferSize = 1024
            options.flushInterval = 0  // no timer; hint and compaction jobs still overlap the step that starts them
            options.writeHints = writeHints
            options.memoryMapping = memoryMapping
            options.automaticCompaction = automaticCompaction
            options.compactionMinDeadBytes = 1
            options.dictionaries = dictionaries
            options.encryption = encryption
            return options
        }
    }

    /// What a run with a cut did.
    struct Run {
        var fileSystem: PowerLossFileSystem
        /// Steps begun (the last one may have been cut short).
        var attempted = 0
        /// Steps that returned without error, in order from the first.
        var acknowledged = 0
        /// Steps covered by the last `sync()` or `close()` that returned.
        var synced = 0
    }

    /// Runs `scenario` in `store` (a copy of `template` if given, else empty), cutting the power at
    /// call `cut` of the file system, or after the last step when nil.
    private func run(_ scenario: Scenario, in store: String, template: String? = nil, cut: Int?) throws -> Run {
        if let template {
            try FileManager.default.copyItem(atPath: template, toPath: store)
        } else {
            try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        let fileSystem = try PowerLossFileSystem(directory: store)
        fileSystem.cutPower(atCall: cut)
        var run = Run(fileSystem: fileSystem)
        let options = scenario.options(fileSystem)
        var current: CaskStore
        do { current = try CaskStore.open(at: store, options: options) } catch {
            XCTAssertTrue(fileSystem.isCut, "\(scenario): the store did not open without a cut: \(error)")
            return run
        }
        for (position, step) in scenario.steps.enumerated() {
            run.attempted = position + 1
            do throws(CaskError) {
                switch step {
                case .put(let key, let value): try current.put(key, value)
                case .delete(let key): try current.delete(key)
                case .batch(let operations):
                    var batch = WriteBatch()
                    for (key, value) in operations {
                        if let value { batch.put(key, value) } else { batch.delete(key) }
                    }
                    try current.write(batch)
                case .sync:
                    try current.sync()
                    run.synced = position + 1
                case .compact:
                    try current.compact()
                case .reopen:
                    current.backgroundWork.wait()
                    try current.close()
                    run.synced = position
                    current = try CaskStore.open(at: store, options: options)
                }
                if run.acknowledged == position { run.acknowledged = position + 1 }
            } catch {
                XCTAssertTrue(fileSystem.isCut, "\(scenario): step \(position) (\(step)) failed without a cut: \(error)")
            }
            current.backgroundWork.wait()
            if fileSystem.isCut { break }
        }
        fileSystem.cutPowerNow()
        try? current.close()
        return run
    }

    /// Writes the disk as `survival` leaves it after `run`'s cut into `image`, reopens it with the
    /// real file system and checks it; returns what is wrong, or nil.
    ///
    /// In `.os` and `.buffered` modes, when files keep their unsynced writes independently of each
    /// other (``PowerLossFileSystem/Survival/random(seed:revertOverwrites:)``), the store need not
    /// hold the state after one prefix of the steps: a rotation does not sync the segment it seals,
    /// so the next segment's records can survive while the end of the sealed one is lost. Then each
    /// key must hold a value it had after one of the allowed steps, and nothing else.
    private func check(_ scenario: Scenario, _ run: Run, _ survival: PowerLossFileSystem.Survival, image: String) throws -> String? {
        try run.fileSystem.writeCrashImage(to: image, survival)
        let states = scenario.states
        let lowest = scenario.durability == .fsync ? run.acknowledged : run.synced
        let allowed = lowest...max(lowest, run.attempted)
        var perKey = false
        if case .random = survival, scenario.durability != .fsync { perKey = true }
        let options = scenario.options()
        let store: CaskStore
        do { store = try CaskStore.open(at: image, options: options) } catch {
            return "the store does not open: \(error)"
        }
        var closed = false
        defer { if !closed { try? store.close() } }
        let ranges = store.recoveryReport.damagedRanges
        let damage = ranges.filter { !isAllowedDamage(scenario, $0.file, $0.offset, among: ranges.map { ($0.file, $0.offset, $0.length) }) }
        var content: [String: [UInt8]] = [:]
        for key in try store.keys() {
            content[String(decoding: key, as: UTF8.self)] = try store.get(key)
        }
        if perKey {
            for key in Set(content.keys).union(states[allowed.lowerBound].keys).sorted() {
                if !allowed.contains(where: { states[$0][key] == content[key] }) {
                    return "\(key) holds \(content[key].map { "\($0.count) bytes" } ?? "nothing"), a state it had after none of steps \(allowed)"
                        + (damage.isEmpty ? "" : "; damage found on reopening: \(damage)")
                }
            }
        } else if !allowed.contains(where: { states[$0] == content }) {
            return "the store holds the state after none of steps \(allowed) (of \(run.attempted) begun): "
                + difference(content, from: states[allowed.lowerBound], "\(allowed.lowerBound)")
                + (allowed.count > 1 ? "; " + difference(content, from: states[allowed.upperBound], "\(allowed.upperBound)") : "")
                + (damage.isEmpty ? "" : "; damage found on reopening: \(damage)")
        }
        if !damage.isEmpty { return "damage found on reopening: \(damage)" }

        // Once recovered: verify finds nothing more, and the store takes writes and keeps them.
        try store.put("after-the-crash", [1, 2, 3])
        try store.close()
        closed = true
        let verification = try CaskStore.verify(at: image, encryption: scenario.encryption)
        let problems = verification.damagedRanges.filter {
            !isAllowedDamage(scenario, $0.file, $0.offset, among: verification.damagedRanges.map { ($0.file, $0.offset, $0.length) })
        }
        if !problems.isEmpty || !verification.invalidHints.isEmpty { return "verify after recovery: \(verification)" }
        let reopened = try CaskStore.open(at: image, options: options)
        defer { try? reopened.close() }
        if reopened.recoveryReport.damagedRanges != ranges || !reopened.recoveryReport.truncations.isEmpty {
            return "second reopening: \(reopened.recoveryReport)"
        }
        content["after-the-crash"] = [1, 2, 3]
        if reopened.count != content.count { return "second reopening: \(reopened.count) keys, expected \(content.count)" }
        for (key, value) in content {
            if try reopened.get(key) != value { return "second reopening: \(key) does not hold its value" }
        }
        return nil
    }

    /// The damage a power cut may leave that recovery does not cut: in `.os` and `.buffered` modes,
    /// the torn tail of a sealed segment (a torn record, and batch members before it whose commit
    /// record is missing): damaged ranges from `offset` to the end of the file, after its header. A rotation hands the
    /// segment's last records to the OS without syncing them (its hint writer syncs it soon after,
    /// in the background) and makes the next segment durable, so that tail is not the store's last.
    /// None in `.fsync` mode, where a segment is synced before the next one is created.
    private func isAllowedDamage(_ scenario: Scenario, _ file: String, _ offset: Int64,
                                 among ranges: [(file: String, offset: Int64, length: Int64)]) -> Bool {
        guard scenario.durability != .fsync, offset >= Int64(SegmentHeader.length),
              SegmentName.segmentID(fromFileName: URL(fileURLWithPath: file).lastPathComponent) != nil,
              let size = (try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber else { return false }
        var end = offset
        for range in ranges.filter({ $0.file == file }).sorted(by: { $0.offset < $1.offset }) where range.offset <= end {
            end = max(end, range.offset + range.length)
        }
        return end == size.int64Value
    }

    private func difference(_ content: [String: [UInt8]], from state: [String: [UInt8]], _ label: String) -> String {
        var lines: [String] = []
        for key in Set(content.keys).union(state.keys).sorted() where content[key] != state[key] {
            lines.append("\(key): \(content[key].map { "\($0.count) bytes" } ?? "absent") (after step \(label): \(state[key].map { "\($0.count) bytes" } ?? "absent"))")
        }
        return lines.joined(separator: ", ")
    }

    /// Runs `scenario` once per cut in `cuts` and checks each crash image `survivals` gives;
    /// returns the number of images checked.
    @discardableResult
    private func cutAndCheck(_ scenario: Scenario, template: String? = nil, cuts: some Sequence<Int>,
                             survivals: (Int) -> [PowerLossFileSystem.Survival]) throws -> Int {
        let work = TemporaryDirectory("cask-powerloss", base: Self.memoryBacked)
        defer { work.remove() }
        var images = 0
        for cut in cuts {
            let store = work.appending("store-\(cut)")
            let run = try run(scenario, in: store, template: template, cut: cut)
            if let disagreement = run.fileSystem.modelDisagreement() {
                XCTFail("\(scenario), cut at call \(cut): the power-loss model disagrees with the disk: \(disagreement)")
            }
            for (position, survival) in survivals(cut).enumerated() {
                let image = work.appending("image-\(cut)-\(position)")
                if let failure = try check(scenario, run, survival, image: image) {
                    let at = run.fileSystem.cutCall.map { "\($0)" } ?? "no call"
                    let step = run.attempted == 0 ? "while opening"
                        : "\(run.acknowledged == run.attempted ? "after" : "during") step \(run.attempted - 1) (\(scenario.steps[run.attempted - 1]))"
                    XCTFail("\(scenario), power cut at call \(cut) (\(at)) \(step), disk: \(survival): \(failure)")
                }
                images += 1
                try? FileManager.default.removeItem(atPath: image)
            }
            try? FileManager.default.removeItem(atPath: store)
        }
        return images
    }

    /// The calls a run of `scenario` makes with no cut before its end.
    private func callCount(_ scenario: Scenario, template: String? = nil) throws -> Int {
        let work = TemporaryDirectory("cask-powerloss-reference", base: Self.memoryBacked)
        defer { work.remove() }
        let run = try run(scenario, in: work.appending("store"), template: template, cut: nil)
        XCTAssertEqual(run.acknowledged, scenario.steps.count, "\(scenario): a step failed without a cut")
        return run.fileSystem.callCount
    }

    private static func survivals(_ seed: Int) -> [PowerLossFileSystem.Survival] {
        [.syncedOnly, .everything, .random(seed: UInt64(seed), revertOverwrites: seed % 2 == 1), .ordered(seed: UInt64(seed))]
    }

    // MARK: Short scenarios, cut at every call

    /// Rotations, an overwrite, deletes, a batch, a sync, a compaction, a reopen: every call cut.
    func testEveryCallOfAShortScenario() throws {
        var images = 0
        for durability in Durability.allCases {
            let scenario = Self.shortScenario(durability)
            let calls = try callCount(scenario)
            images += try cutAndCheck(scenario, cuts: 0...calls, survivals: Self.survivals)
            print("PowerLossTests: \(scenario): \(calls) calls, each cut")
        }
        print("PowerLossTests: \(images) crash images checked")
    }

    /// The same without hint files and mappings, starting from a store whose last segment ends in
    /// a torn record (which the scenario's open cuts): every call cut.
    func testEveryCallOfAShortScenarioFromATornStore() throws {
        let template = TemporaryDirectory("cask-powerloss-template", base: Self.memoryBacked)
        defer { template.remove() }
        let base = try Self.makeTornTemplate(template.path)
        var images = 0
        for durability in Durability.allCases {
            var scenario = Self.shortScenario(durability)
            scenario.name = "short, from a torn store, no hints, no mappings"
            scenario.base = base
            scenario.writeHints = false
            scenario.memoryMapping = false
            let calls = try callCount(scenario, template: template.path)
            images += try cutAndCheck(scenario, template: template.path, cuts: 0...calls, survivals: Self.survivals)
            print("PowerLossTests: \(scenario): \(calls) calls, each cut")
        }
        print("PowerLossTests: \(images) crash images checked")
    }

    static func shortScenario(_ durability: Durability) -> Scenario {
        var random = SeededGenerator(seed: 42)
        func value(_ length: Int) -> [UInt8] { random.bytes(length) }
        var steps: [Step] = []
        for n in 0..<6 { steps.append(.put("k\(n)", value(700))) }  // rotates once
        steps += [
            .put("k1", value(900)),
            .delete("k2"),
            .batch([("k3", value(500)), ("k6", value(40)), ("k0", nil)]),
            .sync,
            .put("k7", value(1500)),
            .put("k7", value(1500)),  // rotates
            .delete("k4"),
            .compact,
            .put("k8", Array(repeating: 8, count: 3000)),  // compressible
            .reopen,
            .batch([("k1", nil), ("k9", value(2500))]),  // rotates
            .put("k5", value(10)),
        ]
        return Scenario(name: "short", durability: durability, steps: steps)
    }

    /// A store with k0...k4, k4 deleted, and a torn record at the end of its segment.
    static func makeTornTemplate(_ path: String) throws -> [String: [UInt8]] {
        var random = SeededGenerator(seed: 7)
        let store = try CaskStore.open(at: path)
        var base: [String: [UInt8]] = [:]
        for n in 0..<5 {
            base["k\(n)"] = random.bytes(300)
            try store.put("k\(n)", base["k\(n)"]!)
        }
        try store.delete("k4")
        base["k4"] = nil
        try store.close()
        for name in try FileManager.default.contentsOfDirectory(atPath: path) where name.hasSuffix(".hint") {
            try FileManager.default.removeItem(atPath: path + "/" + name)
        }
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path + "/" + SegmentName.segment(1)))
        handle.seekToEndOfFile()
        handle.write(Data([0x55, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A]))
        try handle.close()
        return base
    }

    // MARK: Long random scenarios, cut at random calls

    /// Seeded random scenarios of about 100 steps, each cut at 6 random calls.
    func testRandomScenariosCutAtRandomCalls() throws {
        let seeds = Self.seeds
        let random = SeededGenerator.fromEnvironment(fallback: 1_000)
        let first = random.seed
        print("PowerLossTests: seeds \(first)..<\(first + UInt64(seeds)) (CASK_TEST_SEED=\(first) replays them)")
        var images = 0, runs = 0
        for seed in first..<(first + UInt64(seeds)) {
            for (mode, durability) in Durability.allCases.enumerated() {
                let scenario = Self.randomScenario(seed: seed, durability: durability)
                let calls = try callCount(scenario)
                var picker = SeededGenerator(seed: seed &* 31 &+ UInt64(mode))
                let cuts = (0..<6).map { _ in Int.random(in: 0...calls, using: &picker) }
                images += try cutAndCheck(scenario, cuts: cuts) { cut in
                    Self.survivals(cut) + [.random(seed: UInt64(cut) &* 7919 &+ seed, revertOverwrites: false), .ordered(seed: UInt64(cut) &* 7919 &+ seed)]
                }
                runs += cuts.count
            }
        }
        print("PowerLossTests: \(runs) runs of random scenarios, \(images) crash images checked")
    }

    /// Encrypted stores: the short scenario cut at every call, and random scenarios (both
    /// algorithms where the CPU runs them) at random calls. Every open after a cut starts a new
    /// segment before it writes, and a cut leaves no record that does not authenticate where the
    /// store's contents are checked: damage is allowed only where a plain store may have it.
    func testEncryptedScenariosCutAtEveryAndAtRandomCalls() throws {
        var images = 0, runs = 0
        for durability in Durability.allCases {
            var scenario = Self.shortScenario(durability)
            scenario.name = "short, encrypted"
            scenario.encryption = .key(EncryptionTests.key)
            let calls = try callCount(scenario)
            images += try cutAndCheck(scenario, cuts: 0...calls, survivals: Self.survivals)
            runs += calls + 1
        }
        // Two seeds per algorithm; one when the run asks for fewer seeds (the address-sanitizer pass).
        let last: UInt64 = Self.seeds < 12 ? 41 : 42
        for algorithm in EncryptionAlgorithm.allCases where algorithm.isAvailable {
            for seed in UInt64(41)...last {
                for (mode, durability) in Durability.allCases.enumerated() {
                    var scenario = Self.randomScenario(seed: seed, durability: durability)
                    scenario.name = "random \(seed), \(algorithm)"
                    scenario.encryption = .key(EncryptionTests.key, algorithm: algorithm)
                    let calls = try callCount(scenario)
                    var picker = SeededGenerator(seed: seed &* 37 &+ UInt64(mode))
                    let cuts = (0..<4).map { _ in Int.random(in: 0...calls, using: &picker) }
                    images += try cutAndCheck(scenario, cuts: cuts) { cut in
                        Self.survivals(cut) + [.random(seed: UInt64(cut) &* 7919 &+ seed, revertOverwrites: true)]
                    }
                    runs += cuts.count
                }
            }
        }
        print("PowerLossTests: \(runs) runs of encrypted scenarios, \(images) crash images checked")
    }

    /// Dictionaries trained and used while the power goes: a writer that trains one after 16 KiB of
    /// JSON values (in the background), compactions that train and recompress, reopens; each
    /// scenario cut at 8 random calls. A segment that names a dictionary must never reach the disk
    /// without it, nor a record compressed against it be lost to a cut.
    func testDictionaryTrainingAndRecompressionCutAtRandomCalls() throws {
        var images = 0, runs = 0
        for seed in UInt64(1)...3 {
            for (mode, durability) in Durability.allCases.enumerated() {
                var random = SeededGenerator(seed: seed)
                var steps: [Step] = []
                for n in 0..<150 {
                    let key = "user/\(Int.random(in: 0..<40, using: &random))"
                    switch Int.random(in: 0..<100, using: &random) {
                    case 0..<80: steps.append(.put(key, DictionaryTests.profile(n, generation: Int(seed))))
                    case 80..<88: steps.append(.delete(key))
                    case 88..<94: steps.append(.compact)
                    case 94..<97: steps.append(.sync)
                    default: steps.append(.reopen)
                    }
                }
                steps.append(.compact)
                var scenario = Scenario(name: "dictionaries \(seed)", durability: durability, steps: steps)
                scenario.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 16 << 10)
                // Uncut, the scenario trains a dictionary and writes segments that name it.
                let reference = TemporaryDirectory("cask-powerloss-dictionaries", base: Self.memoryBacked)
                _ = try run(scenario, in: reference.appending("store"), template: nil, cut: nil)
                let names = try FileManager.default.contentsOfDirectory(atPath: reference.appending("store"))
                XCTAssertTrue(names.contains { $0.hasSuffix(".dict") }, "\(scenario): no dictionary trained: \(names.sorted())")
                reference.remove()
                let calls = try callCount(scenario)
                var picker = SeededGenerator(seed: seed &* 131 &+ UInt64(mode))
                let cuts = (0..<8).map { _ in Int.random(in: 0...calls, using: &picker) }
                images += try cutAndCheck(scenario, cuts: cuts) { cut in
                    Self.survivals(cut) + [.ordered(seed: UInt64(cut) &* 31 &+ seed)]
                }
                runs += cuts.count
            }
        }
        print("PowerLossTests: \(runs) runs of dictionary scenarios, \(images) crash images checked")
    }

    static func randomScenario(seed: UInt64, durability: Durability) -> Scenario {
        var random = SeededGenerator(seed: seed)
        let keys = (0..<24).map { "key\($0)" }
        func value() -> [UInt8] {
            let length = switch Int.random(in: 0..<10, using: &random) {
            case 0: 0
            case 1: Int.random(in: 1500...3000, using: &random)
            default: Int.random(in: 1...700, using: &random)
            }
            if Bool.random(using: &random) { return random.bytes(length) }
            return Array(repeating: UInt8.random(in: 0...255, using: &random), count: length)
        }
        var steps: [Step] = []
        for _ in 0..<Int.random(in: 80...120, using: &random) {
            let key = keys.randomElement(using: &random)!
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<55: steps.append(.put(key, value()))
            case 55..<75: steps.append(.delete(key))
            case 75..<87:
                steps.append(.batch((0..<Int.random(in: 1...5, using: &random)).map { _ in
                    (keys.randomElement(using: &random)!, Int.random(in: 0..<4, using: &random) == 0 ? nil : value())
                }))
            case 87..<93: steps.append(.sync)
            case 93..<97: steps.append(.compact)
            default: steps.append(.reopen)
            }
        }
        var scenario = Scenario(name: "random \(seed)", durability: durability, steps: steps)
        scenario.writeHints = seed % 3 != 2
        scenario.memoryMapping = seed % 2 == 0
        return scenario
    }

    // MARK: What these tests found

    /// Each small scenario below, cut at every call, failed before its fix.
    private func checkEveryCut(_ scenario: Scenario, template: String? = nil) throws {
        let calls = try callCount(scenario, template: template)
        try cutAndCheck(scenario, template: template, cuts: 0...calls) { cut in
            [.syncedOnly, .ordered(seed: UInt64(cut)), .random(seed: UInt64(cut), revertOverwrites: false)]
        }
    }

    /// A new segment's header was not synced before its name. A rotation, or `compact()`, starts a
    /// segment; a later rotation (in `.os` and `.buffered` modes) or a compaction's outputs then
    /// give the store newer segments; cut before the header reached the disk, the segment was left
    /// empty and not the newest: damage, reported for good (`verify` failing), although nothing
    /// acknowledged was lost.
    func testANewSegmentsHeaderIsDurableBeforeItsName() throws {
        var random = SeededGenerator(seed: 5)
        for durability in Durability.allCases {
            var scenario = Scenario(name: "header before name", durability: durability, steps: [
                .put("a", random.bytes(2500)), .put("b", random.bytes(2500)), .put("c", random.bytes(2500)), .delete("a"), .compact,
            ])
            scenario.writeHints = false  // a hint writer syncs a sealed segment, header included
            scenario.automaticCompaction = false
            try checkEveryCut(scenario)
        }
    }

    /// The same for the header that recovery writes into a last segment whose creation was torn (a
    /// name without its header): it was not synced before the next rotation made the segment not the
    /// newest (found by a second cut in `testSecondCutWhileRecoveringAndWriting`).
    func testARewrittenHeaderIsDurableBeforeTheNextSegment() throws {
        let template = TemporaryDirectory("cask-powerloss-template", base: Self.memoryBacked)
        defer { template.remove() }
        let store = try CaskStore.open(at: template.path)
        try store.put("x", [1, 2, 3])
        try store.close()
        XCTAssertTrue(FileManager.default.createFile(atPath: template.appending(SegmentName.segment(2)), contents: Data()))
        var random = SeededGenerator(seed: 6)
        for durability in Durability.allCases {
            var scenario = Scenario(name: "rewritten header", durability: durability, base: ["x": [1, 2, 3]], steps: [
                .put("a", random.bytes(2500)), .put("b", random.bytes(2500)), .put("c", random.bytes(100)),
            ])
            scenario.writeHints = false
            scenario.automaticCompaction = false
            try checkEveryCut(scenario, template: template.path)
        }
    }

    /// Compaction published its outputs without syncing its inputs: in `.os` and `.buffered` modes
    /// an input sealed by `compact()` itself may not be on disk yet. Cut before the inputs were
    /// deleted, the outputs (holding `b`, written after `delete a`) stood beside an input that had
    /// lost its tail (`delete a`): `a` came back next to a later write. The same sync covers records
    /// in the active segment that make input records dead (and, in `.fsync` mode, a write that is
    /// indexed but still waiting for its `fdatasync` while a compaction drops what it replaced).
    func testCompactionSyncsWhatItCopiesBeforePublishing() throws {
        for durability in Durability.allCases {
            var scenario = Scenario(name: "compaction of unsynced inputs", durability: durability, steps: [
                .put("a", Array(repeating: 1, count: 300)), .sync, .delete("a"), .put("b", Array(repeating: 2, count: 300)), .compact,
            ])
            scenario.writeHints = false
            scenario.automaticCompaction = false
            try checkEveryCut(scenario)
        }
    }

    /// The `.fsync` side of the same gap, and the worst: a write is indexed before its `fdatasync`,
    /// and the compaction its rotation starts in the background dropped the record it replaced and
    /// deleted that record's segment while the write still waited for the disk. Cut then, the write
    /// was lost (allowed: it never returned) and so was the acknowledged value before it.
    func testCompactionWhileAWriteWaitsForItsSync() throws {
        let work = TemporaryDirectory("cask-powerloss-race", base: Self.memoryBacked)
        defer { work.remove() }
        let directory = work.appending("store")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let fileSystem = try PowerLossFileSystem(directory: directory)
        var scenario = Scenario(name: "race", durability: .fsync, steps: [])
        scenario.writeHints = false
        let store = try CaskStore.open(at: directory, options: scenario.options(fileSystem))
        var random = SeededGenerator(seed: 9)
        let old = random.bytes(2000), other = random.bytes(1000), new = random.bytes(2000)
        try store.put("k", old)
        try store.put("j", other)

        // The next put seals segment 1, whose k record it makes dead: the policy compacts segment 1.
        let holding = Lock<PowerLossFileSystem.Hold?>(nil), registered = DispatchSemaphore(value: 0)
        let acknowledged = Lock(false), writing = DispatchGroup()
        DispatchQueue.global().async(group: writing) {
            // The put's own sync, once its record is in segment 2 (not that of the segment's header).
            holding.withLock { $0 = fileSystem.holdNextCall("fdatasync", name: SegmentName.segment(2), longerThan: SegmentHeader.length) }
            registered.signal()
            if (try? store.put("k", new)) != nil { acknowledged.withLock { $0 = true } }
        }
        registered.wait()
        let hold = try XCTUnwrap(holding.withLock { $0 })
        guard hold.waitUntilHeld() else {
            hold.release()
            return XCTFail("the put never synced segment 2")
        }
        store.backgroundWork.wait()  // the compaction
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/" + SegmentName.segment(1)), "segment 1 was not compacted")
        fileSystem.cutPowerNow()
        hold.release()
        writing.wait()
        XCTAssertFalse(acknowledged.withLock { $0 })
        try? store.close()

        let image = work.appending("image")
        try fileSystem.writeCrashImage(to: image, .syncedOnly)
        let reopened = try CaskStore.open(at: image, options: scenario.options())
        defer { try? reopened.close() }
        let value = try reopened.get("k")
        XCTAssertTrue(value == old || value == new, "k holds \(value.map { "\($0.count) bytes" } ?? "nothing"), neither its acknowledged value nor the one being written")
        XCTAssertEqual(try reopened.get("j"), other)
    }

    /// `close()` synced the active segment before the sealed ones awaiting a sync (`.os` and
    /// `.buffered` modes, without hint files to sync them meanwhile): cut in between, the newest
    /// records survived while the end of the segment before them was lost.
    func testCloseSyncsOlderSegmentsFirst() throws {
        var random = SeededGenerator(seed: 3)
        for durability in [Durability.os, .buffered] {
            var scenario = Scenario(name: "close order", durability: durability, steps: [
                .put("a", random.bytes(2000)), .put("b", random.bytes(2000)), .put("c", random.bytes(2000)), .reopen,
            ])
            scenario.writeHints = false
            scenario.automaticCompaction = false
            try checkEveryCut(scenario)
        }
    }

    /// `compact()` sealed the active segment without scheduling its hint (it meant to rewrite it at
    /// once, but a segment without dead records is left as it is). In `.os` and `.buffered` modes
    /// the hint writer is what syncs a sealed segment, so the next segment's hint synced that one
    /// first: cut then, its records survived and the older ones were lost (found by seed 20041).
    func testSegmentsSealedByCompactReachTheDiskInOrder() throws {
        var random = SeededGenerator(seed: 11)
        for durability in [Durability.os, .buffered] {
            var scenario = Scenario(name: "sealed by compact", durability: durability, steps: [
                .put("a", random.bytes(300)), .put("b", random.bytes(300)), .compact,
                .put("c", random.bytes(2500)), .put("d", random.bytes(2500)), .put("e", random.bytes(100)),
            ])
            scenario.automaticCompaction = false
            try checkEveryCut(scenario)
        }
    }

    // MARK: A second cut while recovering

    /// The disk after a cut is opened again — cutting torn tails, rewriting a torn header, finishing
    /// a compaction — and written to, and the power is cut again at every call of that.
    func testSecondCutWhileRecoveringAndWriting() throws {
        let work = TemporaryDirectory("cask-powerloss-twice", base: Self.memoryBacked)
        defer { work.remove() }
        var images = 0, firstImages = 0
        for durability in Durability.allCases {
            let first = Self.shortScenario(durability)
            let calls = try callCount(first)
            var picker = SeededGenerator(seed: 77)
            for cut in (0..<max(1, Self.seeds / 2)).map({ _ in Int.random(in: 0...calls, using: &picker) }) {
                let store = work.appending("first-\(durability)-\(cut)")
                let run = try run(first, in: store, cut: cut)
                let survival = PowerLossFileSystem.Survival.random(seed: UInt64(cut), revertOverwrites: false)
                let template = work.appending("template-\(durability)-\(cut)")
                try run.fileSystem.writeCrashImage(to: template, survival)
                try? FileManager.default.removeItem(atPath: store)
                // What the template holds once recovered (the same image is checked to be a state the
                // first run allows).
                if let failure = try check(first, run, survival, image: work.appending("probe-image")) {
                    XCTFail("\(first), first cut at call \(cut): \(failure)")
                }
                let probe = work.appending("probe")
                try FileManager.default.copyItem(atPath: template, toPath: probe)
                let recovered = try CaskStore.open(at: probe, options: first.options())
                var base: [String: [UInt8]] = [:]
                for key in try recovered.keys() { base[String(decoding: key, as: UTF8.self)] = try recovered.get(key) }
                try recovered.close()
                try? FileManager.default.removeItem(atPath: probe)
                try? FileManager.default.removeItem(atPath: work.appending("probe-image"))
                firstImages += 1

                var random = SeededGenerator(seed: UInt64(cut))
                var second = Scenario(name: "second cut after call \(cut) of short", durability: durability, base: base, steps: [
                    .put("k0", random.bytes(900)), .delete("k1"), .batch([("k2", random.bytes(1200)), ("k9", nil)]),
                    .put("k3", random.bytes(2000)), .sync, .put("k4", random.bytes(30)),
                ])
                second.automaticCompaction = false
                let secondCalls = try callCount(second, template: template)
                images += try cutAndCheck(second, template: template, cuts: 0...secondCalls) { cut in
                    [.syncedOnly, .random(seed: UInt64(cut), revertOverwrites: false), .ordered(seed: UInt64(cut))]
                }
                try? FileManager.default.removeItem(atPath: template)
            }
        }
        print("PowerLossTests: \(firstImages) first crashes, \(images) images after a second cut checked")
    }
}
