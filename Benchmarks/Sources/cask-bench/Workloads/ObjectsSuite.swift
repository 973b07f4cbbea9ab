import Cask
import CAllocationCounter
import Foundation

/// The `objects` workloads (issue 4): Codable values end to end, in one worker process per variant
/// (``ObjectVariant``) and one for the coders alone.
///
/// - `objects_set`: `count` objects (``ProfileData``), keys `users/0`… each once, encoded and
///   stored; the variant's `finishSets` inside the clock.
/// - `objects_get`: `count` gets of random keys (with replacement), read and decoded; every
///   decoded id is checked in the loop, and 1,000 whole values after the clock stops.
/// - `objects_encode`, `objects_decode` (worker `coders`): pure coding, no I/O — Cask's binary coder
///   against `JSONEncoder`/`JSONDecoder` and `PropertyListEncoder`/`PropertyListDecoder` (binary),
///   each coder instance reused, as an app would.
struct ObjectsSuite {
    static let codersWorker = "coders"
    /// The coders' engine names: `cask` is Cask's binary coder; `floor` is no coder anyone would
    /// use, but the least any Codable coder must do (``FloorEncoder``).
    static let coderNames = ["cask", "json", "plist", "floor"]

    let profiles: ProfileData
    let num: Int
    let root: String
    let run: Int
    let only: Set<String>?

    private var seed: UInt64 { 1000 &+ UInt64(run) &* 7919 }

    private func wanted(_ name: String) -> Bool { only?.contains(name) ?? true }

    /// The worker processes of the objects phase that `only` needs, in order.
    static func workers(only: Set<String>?) -> [String] {
        let wanted = { (name: String) in only?.contains(name) ?? true }
        var workers: [String] = []
        if wanted("objects_set") || wanted("objects_get") {
            workers += ObjectVariant.all.filter { wanted("objects_set") || $0.runsGets }.map(\.name)
        }
        if wanted("objects_encode") || wanted("objects_decode") { workers.append(codersWorker) }
        return workers
    }

    /// Runs worker `name`: a variant's sets and gets, or the coders.
    func run(_ name: String) throws {
        if name == Self.codersWorker { return try coders() }
        guard let variant = ObjectVariant.named(name) else { throw BenchError.usage("unknown objects variant '\(name)'") }
        try setAndGet(variant)
    }

    // MARK: Stores

    private func setAndGet(_ variant: ObjectVariant) throws {
        let dir = root + "/" + variant.name
        try? FileManager.default.removeItem(atPath: dir)
        try makeDirectory(dir)
        let count = variant.count(num)
        let size = try Self.encodedSize(profiles, variant.coder)
        let fields = [("coder", Self.coderField(variant.coder)), ("persist", variant.persistence)]
        let engine = try variant.open(dir)

        let (setSeconds, setAllocations) = try timed(count) {
            for n in 0..<count { try engine.set(profiles.profile(n), forKey: ProfileData.key(n)) }
            try engine.finishSets()
        }
        try engine.checkPersisted(count: count)
        if wanted("objects_set") {
            report(variant.name, "objects_set", mode: "nosync", count: count, size: size, seconds: setSeconds,
                   allocations: setAllocations, dir: dir, fields: fields)
        }

        if variant.runsGets && wanted("objects_get") {
            var rng = SplitMix(seed: seed &+ 21)
            let indices = (0..<count).map { _ in Int(rng.next() % UInt64(count)) }
            let (getSeconds, getAllocations) = try timed(count) {
                for i in indices {
                    guard let profile = try engine.get(forKey: ProfileData.key(i)), profile.id == profiles.id(i) else {
                        throw BenchError.check("\(variant.name) objects_get: \(ProfileData.key(i)) is missing or decodes to another object")
                    }
                }
            }
            for i in indices.prefix(1_000) {
                if try engine.get(forKey: ProfileData.key(i)) != profiles.profile(i) {
                    throw BenchError.check("\(variant.name) objects_get: \(ProfileData.key(i)) does not decode to the object written")
                }
            }
            report(variant.name, "objects_get", mode: "read", count: count, size: size, seconds: getSeconds,
                   allocations: getAllocations, dir: dir, fields: fields)
        }
        try engine.close()
        try? FileManager.default.removeItem(atPath: dir)
    }

    // MARK: Coders

    /// Encodes, then decodes, `min(num / 10, 100,000)` objects with each coder in turn.
    private func coders() throws {
        let count = max(1, min(num / 10, 100_000))
        let binaryEncoder = CaskBinaryEncoder(), binaryDecoder = CaskBinaryDecoder()
        let jsonEncoder = JSONEncoder(), jsonDecoder = JSONDecoder()
        let plistEncoder = PropertyListEncoder(), plistDecoder = PropertyListDecoder()
        plistEncoder.outputFormat = .binary
        let floorEncoder = FloorEncoder(), floorDecoder = FloorDecoder()

        // The bytes decoded: the first pool-size objects, encoded before the clock starts.
        let pool = (0..<min(count, ProfileData.poolSize)).map { profiles.profile($0) }
        let binary = try pool.map { try binaryEncoder.encode($0) }
        let json = try pool.map { try jsonEncoder.encode($0) }
        let plist = try pool.map { try plistEncoder.encode($0) }
        let floor = try pool.map { try floorEncoder.encode($0) }

        func check(_ decoded: Profile, _ n: Int, _ coder: String) throws {
            if decoded.id != pool[n % pool.count].id { throw BenchError.check("\(coder) decoded object \(n % pool.count) with another id") }
        }
        let floorSize = (floor.reduce(0) { $0 + $1.count } + floor.count / 2) / max(floor.count, 1)
        let coders: [(name: String, coder: ObjectCoder?, encode: (Int) throws -> Int, decode: (Int) throws -> Void)] = [
            ("cask", .binary, { n in try binaryEncoder.encode(profiles.profile(n)).count },
             { n in try check(try binaryDecoder.decode(Profile.self, from: binary[n % binary.count]), n, "cask") }),
            ("json", .json, { n in try jsonEncoder.encode(profiles.profile(n)).count },
             { n in try check(try jsonDecoder.decode(Profile.self, from: json[n % json.count]), n, "json") }),
            ("plist", .propertyList, { n in try plistEncoder.encode(profiles.profile(n)).count },
             { n in try check(try plistDecoder.decode(Profile.self, from: plist[n % plist.count]), n, "plist") }),
            ("floor", nil, { n in try floorEncoder.encode(profiles.profile(n)).count },
             { n in try check(try floorDecoder.decode(Profile.self, from: floor[n % floor.count]), n, "floor") }),
        ]
        // Every coder must give back exactly what it was given.
        for (n, profile) in pool.prefix(1_000).enumerated() {
            let decoded = [try binaryDecoder.decode(Profile.self, from: binary[n]), try jsonDecoder.decode(Profile.self, from: json[n]),
                           try plistDecoder.decode(Profile.self, from: plist[n]), try floorDecoder.decode(Profile.self, from: floor[n])]
            if let wrong = decoded.firstIndex(where: { $0 != profile }) {
                throw BenchError.check("the \(coders[wrong].name) coder does not round-trip object \(n)")
            }
        }
        // The coders take turns in 10 chunks (each first in some), so a slow moment of the shared
        // machine falls on all of them rather than on one.
        let chunks = min(10, count)
        for workload in ["objects_encode", "objects_decode"] where wanted(workload) {
            ProcessStats.resetPeak()
            var seconds = [Double](repeating: 0, count: coders.count)
            var allocations = [UInt64](repeating: 0, count: coders.count)
            for chunk in 0..<chunks {
                let objects = (chunk * count / chunks)..<((chunk + 1) * count / chunks)
                for turn in coders.indices {
                    let c = (turn + chunk) % coders.count
                    let coder = coders[c]
                    let before = cask_thread_allocations()
                    seconds[c] += try Clock.time {
                        if workload == "objects_encode" {
                            var bytes = 0
                            for n in objects { bytes &+= try coder.encode(n) }
                            if bytes == 0 { throw BenchError.check("\(coder.name) encoded nothing") }
                        } else {
                            for n in objects { try coder.decode(n) }
                        }
                    }
                    allocations[c] += cask_thread_allocations() - before
                }
            }
            for (c, coder) in coders.enumerated() {
                report(coder.name, workload, mode: "memory", count: count, size: try coder.coder.map { try Self.encodedSize(profiles, $0) } ?? floorSize,
                       seconds: seconds[c], allocations: Double(allocations[c]) / Double(count), dir: nil,
                       fields: [("coder", coder.coder.map(Self.coderField) ?? "floor"), ("chunks", "\(chunks)")])
            }
        }
    }

    // MARK: Measuring

    /// Times `body` (`count` operations) and counts the calling thread's heap allocations per operation.
    private func timed(_ count: Int, _ body: () throws -> Void) throws -> (seconds: Double, allocationsPerOp: Double) {
        ProcessStats.resetPeak()
        let before = cask_thread_allocations()
        let seconds = try Clock.time(body)
        return (seconds, Double(cask_thread_allocations() - before) / Double(max(count, 1)))
    }

    private func report(_ engine: String, _ workload: String, mode: String, count: Int, size: Int, seconds: Double,
                        allocations: Double, dir: String?, fields: [(String, String)]) {
        let measurement = Measurement(
            engine: engine, workload: workload, mode: mode, num: count, valueSize: size, seconds: seconds, bytes: count * size,
            diskBytes: dir.map(ProcessStats.diskBytes) ?? 0, rssKB: ProcessStats.rss().peak,
            extra: fields + [("allocs_per_op", String(format: "%.1f", allocations)), ("seconds", String(format: "%.4f", seconds))])
        print(measurement.line)
        fflush(nil)
    }

    /// The mean encoded size of the pool's objects with `coder` (the `value_size` of the RESULT lines).
    static func encodedSize(_ profiles: ProfileData, _ coder: ObjectCoder) throws -> Int {
        let sample = (0..<ProfileData.poolSize).map { profiles.profile($0) }
        let bytes = try sample.reduce(0) { $0 + (try coder.encode($1).count) }
        return (bytes + sample.count / 2) / sample.count
    }

    static func coderField(_ coder: ObjectCoder) -> String {
        switch coder {
        case .binary: "binary"
        case .json: "json"
        case .propertyList: "plist"
        }
    }
}
