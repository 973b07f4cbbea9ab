import Cask
import Foundation

/// One file per object through ``FilePerObjectEngine`` in nosync mode (temporary file + `rename`,
/// no `fsync`), encoded with a Foundation coder kept for the whole run.
///
/// Foundation's own `Data.write(to:options: .atomic)` is not used: on Linux it `fsync`s the
/// temporary file before the `rename`, which would compare with Cask's `.fsync`, not `.os`.
final class FileObjectEngine: ObjectEngine {
    private let files: FilePerObjectEngine
    private let encode: (Profile) throws -> Data
    private let decode: (Data) throws -> Profile

    init(directory: String, coder: ObjectCoder) throws {
        files = try FilePerObjectEngine(directory: directory, mode: .nosync)
        switch coder {
        case .json:
            let encoder = JSONEncoder(), decoder = JSONDecoder()
            encode = { try encoder.encode($0) }
            decode = { try decoder.decode(Profile.self, from: $0) }
        case .propertyList:
            let encoder = PropertyListEncoder(), decoder = PropertyListDecoder()
            encoder.outputFormat = .binary
            encode = { try encoder.encode($0) }
            decode = { try decoder.decode(Profile.self, from: $0) }
        case .binary:
            throw BenchError.usage("the file-per-object variants use Foundation's coders")
        }
    }

    func set(_ profile: Profile, forKey key: String) throws {
        let data = try encode(profile)
        var key = key
        try key.withUTF8 { key in try data.withUnsafeBytes { try files.put(UnsafeRawBufferPointer(key), $0) } }
    }

    func get(forKey key: String) throws -> Profile? {
        var key = key
        guard let data = try key.withUTF8({ key in try files.get(UnsafeRawBufferPointer(key)) { Data($0) } }) else { return nil }
        return try decode(data)
    }

    func close() throws { try files.close() }
}
