import Foundation
#if canImport(Glibc)
import Glibc
#endif

// libFuzzer target: arbitrary bytes go to the binary object decoder as a model that uses every
// kind of value it supports. Decoding may fail with an error, never crash, hang or allocate
// without bound; and what decodes re-encodes to bytes that decode to the same value.
// Built and run by Tools/fuzz.sh.

struct FuzzAddress: Codable {
    var street: String
    var city: String
    var postcode: String?
}

enum FuzzRole: Codable {
    case guest
    case member(since: Date)
    case admin(level: Int, scopes: [String])
}

struct FuzzProfile: Codable {
    var id: UUID
    var name: String
    var age: Int
    var score: Double
    var ratio: Float
    var active: Bool
    var avatar: Data
    var homepage: URL?
    var joined: Date
    var tags: [String]
    var settings: [String: Int]
    var addresses: [FuzzAddress]
    var role: FuzzRole
    var nickname: String?
    var small: [Int8]
    var counter: UInt64
    var nested: [[String: [Int?]]]
}

enum ObjectDecoderFuzzer {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        roundTrip(FuzzProfile.self, bytes)
        roundTrip([String: [Int?]].self, bytes)
        roundTrip(FuzzRole.self, bytes)
        roundTrip([FuzzAddress].self, bytes)
    }
}

private func roundTrip<T: Codable>(_ type: T.Type, _ bytes: UnsafeRawBufferPointer) {
    guard let value = try? CaskBinaryDecoder().decode(type, from: bytes) else { return }
    guard let encoded = try? CaskBinaryEncoder().encode(value) else {
        fatalError("a decoded \(type) does not encode")
    }
    let decoded: T
    do {
        decoded = try CaskBinaryDecoder().decode(type, from: encoded)
    } catch {
        fatalError("the encoding of a decoded \(type) does not decode: \(error)")
    }
    // Compared through a canonical form: dictionaries iterate in a per-instance order, so the
    // binary encodings of equal values can differ; NaN is not equal to itself.
    guard canonical(decoded) == canonical(value) else {
        fatalError("a decoded \(type) re-encodes to a different value")
    }
}

private func canonical(_ value: some Encodable) -> Data? {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
    encoder.dataEncodingStrategy = .base64
    return try? encoder.encode(value)
}

// MARK: Seed corpus

extension ObjectDecoderFuzzer {
    /// The seed corpus: encodings of values of each fuzzed type.
    static func writeSeeds(to seeds: String) throws {
        let profile = FuzzProfile(
            id: UUID(uuidString: "6F1B8C2E-3D4A-4B5C-9E8F-0A1B2C3D4E5F")!, name: "Ada Lovelace", age: 36,
            score: 97.5, ratio: 0.25, active: true, avatar: Data([0, 1, 2, 0xFF]),
            homepage: URL(string: "https://example.org/ada"), joined: Date(timeIntervalSince1970: 1_700_000_000),
            tags: ["math", "engines"], settings: ["theme": 2, "fontSize": 14],
            addresses: [FuzzAddress(street: "12 St James's Square", city: "London", postcode: nil)],
            role: .admin(level: 3, scopes: ["read", "write"]), nickname: nil, small: [-128, 0, 127],
            counter: .max, nested: [["a": [1, nil, 3]], [:]])
        var minimal = profile
        minimal.homepage = nil
        minimal.nickname = "ada"
        minimal.role = .member(since: Date(timeIntervalSince1970: 0))
        minimal.addresses = []
        let encoder = CaskBinaryEncoder()
        let seedValues: [(String, [UInt8])] = [
            ("profile", try encoder.encode(profile)),
            ("profile-minimal", try encoder.encode(minimal)),
            ("dictionary", try encoder.encode(["x": [1, nil], "y": []] as [String: [Int?]])),
            ("role-guest", try encoder.encode(FuzzRole.guest)),
            ("addresses", try encoder.encode(profile.addresses + [FuzzAddress(street: "", city: "Ü", postcode: "N1")])),
        ]
        for (name, bytes) in seedValues {
            try Data(bytes).write(to: URL(fileURLWithPath: seeds + "/" + name))
        }
    }
}
