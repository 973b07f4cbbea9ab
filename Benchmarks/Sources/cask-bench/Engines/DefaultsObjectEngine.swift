import Foundation

/// `UserDefaults` holding JSON-encoded `Data`, as swift-corelibs-foundation implements it on Linux:
/// a suite lives in `$XDG_CONFIG_HOME/<suite>.plist`; `set` changes only memory, and
/// `synchronize()` — nothing else, not even exiting — writes the file: the whole XML property list,
/// rewritten in place (`open` with `O_TRUNC`, `write`, `fsync`; no temporary file, no `rename`).
final class DefaultsObjectEngine: ObjectEngine {
    static let suiteName = "cask-bench-objects"
    private let defaults: UserDefaults
    private let synchronizeEach: Bool
    private let encoder = JSONEncoder(), decoder = JSONDecoder()
    /// The suite's property-list file.
    let file: String

    /// `directory` must be `$XDG_CONFIG_HOME` (the coordinator sets it for this worker), so the
    /// suite's file is written there and never in the user's own configuration.
    init(directory: String, synchronizeEach: Bool) throws {
        let configuration = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"].map { ($0 as NSString).standardizingPath }
        guard configuration == (directory as NSString).standardizingPath else {
            throw BenchError.usage("the defaults variants need XDG_CONFIG_HOME=\(directory) (UserDefaults writes its plist there; the coordinator sets it), not \(configuration ?? "unset")")
        }
        try makeDirectory(directory)
        file = directory + "/" + Self.suiteName + ".plist"
        guard !FileManager.default.fileExists(atPath: file), let defaults = UserDefaults(suiteName: Self.suiteName) else {
            throw BenchError.check("defaults: \(file) exists already, or the suite does not open")
        }
        self.defaults = defaults
        self.synchronizeEach = synchronizeEach
    }

    func set(_ profile: Profile, forKey key: String) throws {
        defaults.set(try encoder.encode(profile), forKey: key)
        if synchronizeEach { try synchronize() }
    }

    func finishSets() throws {
        if !synchronizeEach { try synchronize() }
    }

    private func synchronize() throws {
        guard defaults.synchronize() else { throw BenchError.engine("defaults", "synchronize", "returned false (\(file))") }
    }

    func get(forKey key: String) throws -> Profile? {
        guard let data = defaults.data(forKey: key) else { return nil }
        return try decoder.decode(Profile.self, from: data)
    }

    /// Reads the suite's file back: every object must be in it as `Data`.
    func checkPersisted(count: Int) throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        guard let plist = try PropertyListSerialization.propertyList(from: bytes, format: nil) as? [String: Any] else {
            throw BenchError.check("defaults: \(file) is not a dictionary")
        }
        let stored = plist.filter { $0.key.hasPrefix("users/") && $0.value is Data }.count
        if stored != count { throw BenchError.check("defaults: \(file) holds \(stored) objects, not \(count)") }
    }

    func close() throws {}
}
