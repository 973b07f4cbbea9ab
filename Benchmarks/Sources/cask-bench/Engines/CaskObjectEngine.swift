import Cask
import Foundation

/// Cask's object API: `set(_:forKey:)` / `get(_:forKey:)` on a store in `.os` durability (nosync).
final class CaskObjectEngine: ObjectEngine {
    let store: CaskStore

    init(directory: String, coder: ObjectCoder) throws {
        var options = CaskStore.Options(durability: CaskEngine.durability(.nosync))
        options.automaticCompaction = CaskEngine.automaticCompaction
        options.objects.coder = coder
        store = try CaskStore.open(at: directory, options: options)
    }

    func set(_ profile: Profile, forKey key: String) throws { try store.set(profile, forKey: key) }

    func get(forKey key: String) throws -> Profile? { try store.get(Profile.self, forKey: key) }

    func close() throws { try store.close() }
}
