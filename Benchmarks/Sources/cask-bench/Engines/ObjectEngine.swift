import Cask
import Foundation

/// One way an app keeps Codable objects, driven by the `objects` workloads (``ObjectsSuite``):
/// Cask's object API with either coder, one file per object, or `UserDefaults`. Each variant runs
/// in its own worker process.
protocol ObjectEngine: AnyObject {
    /// Encodes `profile` and stores it under `key`.
    func set(_ profile: Profile, forKey key: String) throws
    /// Ends a set workload (timed): whatever persists the sets that `set` itself did not.
    func finishSets() throws
    /// Reads the object under `key` and decodes it; nil when absent.
    func get(forKey key: String) throws -> Profile?
    /// After the sets, untimed: throws unless all `count` objects are in the engine's files.
    func checkPersisted(count: Int) throws
    func close() throws
}

extension ObjectEngine {
    func finishSets() throws {}
    func checkPersisted(count: Int) throws {}
}

/// The `objects` variants, by the names RESULT lines use (`engine=`), in report order.
struct ObjectVariant: Sendable {
    let name: String
    /// The coder, for the `coder=` field and the encoded size.
    let coder: ObjectCoder
    /// What makes a set persistent (`persist=`): `os` (Cask's `.os` mode: the record is in the page
    /// cache on return), `rename`, `synchronize-at-end`, `synchronize-each`.
    let persistence: String
    /// What a set and a get do, for the report (Markdown).
    let description: String
    /// Whether it runs `objects_get` (the `defaults-sync` variant reads as `defaults` does).
    let runsGets: Bool
    /// Objects written (and gets) for the suite's `num`.
    let count: @Sendable (_ num: Int) -> Int
    let open: @Sendable (_ directory: String) throws -> any ObjectEngine

    /// One file per object costs ~100 µs a set: a tenth of num, as the `files` engine runs. A
    /// `UserDefaults` set costs time proportional to the keys already in the suite (and a
    /// `synchronize()` rewrites all of them): num/100, at most 5,000 (num/1,000, at most 500, when
    /// synchronizing each).
    static let fileCount: @Sendable (Int) -> Int = { max(1, min($0 / 10, 100_000)) }

    static let all: [ObjectVariant] = [
        ObjectVariant(
            name: "cask", coder: .binary, persistence: "os",
            description: "`store.set(profile, forKey:)` with the binary coder (the default), durability `.os` (each set stored into the segment's mapping before it returns); get: `store.get(Profile.self, forKey:)`",
            runsGets: true, count: { $0 }, open: { try CaskObjectEngine(directory: $0, coder: .binary) }),
        ObjectVariant(
            name: "cask-json", coder: .json, persistence: "os",
            description: "the same with `options.objects.coder = .json` (the store makes a `JSONEncoder`/`JSONDecoder` per call)",
            runsGets: true, count: { $0 }, open: { try CaskObjectEngine(directory: $0, coder: .json) }),
        ObjectVariant(
            name: "files-json", coder: .json, persistence: "rename",
            description: "`JSONEncoder` (one, reused), then the `files` engine's put: write a temporary file and `rename` it over the object's file (256 directories), **no `fsync`**; get: read the file, `JSONDecoder`",
            runsGets: true, count: fileCount, open: { try FileObjectEngine(directory: $0, coder: .json) }),
        ObjectVariant(
            name: "files-plist", coder: .propertyList, persistence: "rename",
            description: "the same with `PropertyListEncoder`/`PropertyListDecoder` (binary property lists)",
            runsGets: true, count: fileCount, open: { try FileObjectEngine(directory: $0, coder: .propertyList) }),
        ObjectVariant(
            name: "defaults", coder: .json, persistence: "synchronize-at-end",
            description: "`UserDefaults(suiteName:)`: `set(JSONEncoder().encode(profile), forKey:)` for every object, then one `synchronize()` (timed) — the only call that writes: it rewrites the whole XML plist in place and `fsync`s it; get: `data(forKey:)` (from memory) + `JSONDecoder`",
            runsGets: true, count: { max(1, min($0 / 100, 5_000)) }, open: { try DefaultsObjectEngine(directory: $0, synchronizeEach: false) }),
        ObjectVariant(
            name: "defaults-sync", coder: .json, persistence: "synchronize-each",
            description: "as `defaults`, with `synchronize()` after every set, so that each object is on disk before the next (and `fsync`ed: stronger than the others); sets only",
            runsGets: false, count: { max(1, min($0 / 1_000, 500)) }, open: { try DefaultsObjectEngine(directory: $0, synchronizeEach: true) }),
    ]

    static func named(_ name: String) -> ObjectVariant? { all.first { $0.name == name } }
}
