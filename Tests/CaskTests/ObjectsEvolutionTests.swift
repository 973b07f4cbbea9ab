import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Model evolution: records written by an "old" model (checked in under Fixtures/objects-v1) decode
/// with a "new" one that reordered fields, gained optional fields and enum cases, lost a field and
/// widened numbers. The fixtures also pin the binary coding: today's encoder must still produce
/// them byte for byte. If a change is intended, bump `ObjectFormat.version`, document it in
/// FORMAT.md, and regenerate with `CASK_REGENERATE_FIXTURES=1 swift test --filter ObjectsEvolutionTests`.
final class ObjectsEvolutionTests: XCTestCase {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/objects-v1")

    /// What the old model wrote, by fixture file name.
    static func oldRecords() throws -> [String: [UInt8]] {
        let encoder = CaskBinaryEncoder()
        return [
            "profile-admin.bin": try encoder.encode(V1.Profile.admin),
            "profile-guest.bin": try encoder.encode(V1.Profile.guest),
            "profiles.bin": try encoder.encode([V1.Profile.admin, V1.Profile.guest, V1.Profile.member]),
            "roles.bin": try encoder.encode([V1.Role.guest, .member(since: 2019), .admin(level: 3, scopes: ["all"])]),
        ]
    }

    func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: Self.fixtures.appendingPathComponent(name)))
    }

    func testFixturesAreWhatTheOldModelWrites() throws {
        let records = try Self.oldRecords()
        if ProcessInfo.processInfo.environment["CASK_REGENERATE_FIXTURES"] != nil {
            try FileManager.default.createDirectory(at: Self.fixtures, withIntermediateDirectories: true)
            for (name, bytes) in records { try Data(bytes).write(to: Self.fixtures.appendingPathComponent(name)) }
        }
        for (name, bytes) in records {
            XCTAssertEqual(try fixture(name), bytes, "\(name) differs from the fixture: the binary coding changed")
        }
    }

    func testNewModelReadsOldRecords() throws {
        let decoder = CaskBinaryDecoder()
        let admin = try decoder.decode(V2.Profile.self, from: try fixture("profile-admin.bin"))
        XCTAssertEqual(admin, V2.Profile(
            email: "ada@example.com", name: "Ada", id: 1, nickname: nil, age: 36, score: 99.5, tags: ["math", "engines"],
            address: V2.Address(city: "London", street: "12 St James's Square", country: nil),
            role: .admin(level: 3, scopes: ["read", "write"]),
            pets: [V2.Pet(kind: "cat", name: "Babbage", age: nil)], settings: ["theme": 2], lastLogin: nil))

        let guest = try decoder.decode(V2.Profile.self, from: try fixture("profile-guest.bin"))
        XCTAssertEqual(guest.role, .guest)
        XCTAssertEqual(guest.pets, [])
        XCTAssertEqual(guest.age, Int64(Int32.min))

        let all = try decoder.decode([V2.Profile].self, from: try fixture("profiles.bin"))
        XCTAssertEqual(all.map(\.id), [1, 2, 3])
        XCTAssertEqual(all[2].role, .member(since: 2015))
        XCTAssertEqual(all[2].score, Double(Float(0.1)))

        let roles = try decoder.decode([V2.Role].self, from: try fixture("roles.bin"))
        XCTAssertEqual(roles, [.guest, .member(since: 2019), .admin(level: 3, scopes: ["all"])])
    }

    /// The old model reads new records too, as long as the new one only added fields.
    func testOldModelReadsNewRecordsThatOnlyAddedFields() throws {
        let newAddress = V2.Address(city: "Paris", street: "1 Rue", country: "FR")
        let old = try CaskBinaryDecoder().decode(V1.Address.self, from: try CaskBinaryEncoder().encode(newAddress))
        XCTAssertEqual(old, V1.Address(street: "1 Rue", city: "Paris"))
        // A field the old model requires and the new one dropped is reported by name and path.
        let newProfile = V2.Profile(email: "e", name: "n", id: 9, nickname: "nick", age: 1, score: 1, tags: [],
                                    address: newAddress, role: .owner, pets: [], settings: [:], lastLogin: Date())
        XCTAssertThrowsError(try CaskBinaryDecoder().decode(V1.Profile.self, from: try CaskBinaryEncoder().encode(newProfile))) { error in
            guard case DecodingError.keyNotFound(let key, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(key.stringValue, "legacyFlag")
        }
    }

    /// The same, through the store: a record written by the old model, read with the new.
    func testStoreReadsOldRecordsWithTheNewModel() throws {
        let dir = TemporaryDirectory("cask-objects-evolution")
        let store = try CaskStore.open(at: dir.path)
        try store.put("users/1", try fixture("profile-admin.bin"))
        try store.set(V1.Profile.guest, forKey: "users/2")
        XCTAssertEqual(try store.get(V2.Profile.self, forKey: "users/1")?.name, "Ada")
        XCTAssertEqual(try store.values(of: V2.Profile.self, prefix: "users/").map(\.value.id), [1, 2])
        // The old model cannot read a widened value that no longer fits: the error names key and path.
        var wide = try store.get(V2.Profile.self, forKey: "users/1")!
        wide.age = Int64(Int32.max) + 1
        try store.set(wide, forKey: "users/3")
        XCTAssertThrowsError(try store.get(V1.Profile.self, forKey: "users/3")) { error in
            XCTAssertEqual(error as? CaskError, .objectDecodingFailed(
                key: "users/3", type: "Profile", codingPath: "age", reason: "the integer at offset 28 does not fit in Int32"))
            XCTAssertEqual("\(error)", "value of key \"users/3\" does not decode as Profile at age: the integer at offset 28 does not fit in Int32; read it with the type and coder that wrote it, or overwrite it")
        }
        try store.close()
    }
}

/// The "old" model that wrote the fixtures. Do not change it: the fixtures are its output.
enum V1 {
    struct Profile: Codable, Equatable {
        var id: Int
        var name: String
        var email: String
        var age: Int32
        var score: Float
        var legacyFlag: Bool
        var tags: [String]
        var address: Address
        var role: Role
        var pets: [Pet]
        var settings: [String: Int]

        static let admin = Profile(
            id: 1, name: "Ada", email: "ada@example.com", age: 36, score: 99.5, legacyFlag: true, tags: ["math", "engines"],
            address: Address(street: "12 St James's Square", city: "London"), role: .admin(level: 3, scopes: ["read", "write"]),
            pets: [Pet(name: "Babbage", kind: "cat")], settings: ["theme": 2])  // one entry: dictionary order varies by process
        static let guest = Profile(
            id: 2, name: "Guest", email: "", age: .min, score: 0, legacyFlag: false, tags: [],
            address: Address(street: "", city: ""), role: .guest, pets: [], settings: [:])
        static let member = Profile(
            id: 3, name: "Grace", email: "grace@example.com", age: 85, score: 0.1, legacyFlag: false, tags: ["cobol"],
            address: Address(street: "Arlington", city: "VA"), role: .member(since: 2015),
            pets: [Pet(name: "Bug", kind: "moth"), Pet(name: "Compiler", kind: "dog")], settings: ["theme": 1])
    }

    struct Address: Codable, Equatable {
        var street: String
        var city: String
    }

    enum Role: Codable, Equatable {
        case guest
        case member(since: Int)
        case admin(level: Int, scopes: [String])
    }

    struct Pet: Codable, Equatable {
        var name: String
        var kind: String
    }
}

/// The "new" model: fields reordered, `legacyFlag` gone, optional fields and an enum case added,
/// `age` widened to Int64 and `score` to Double.
enum V2 {
    struct Profile: Codable, Equatable {
        var email: String
        var name: String
        var id: Int
        var nickname: String?
        var age: Int64
        var score: Double
        var tags: [String]
        var address: Address
        var role: Role
        var pets: [Pet]
        var settings: [String: Int]
        var lastLogin: Date?
    }

    struct Address: Codable, Equatable {
        var city: String
        var street: String
        var country: String?
    }

    enum Role: Codable, Equatable {
        case guest
        case member(since: Int)
        case admin(level: Int, scopes: [String])
        case owner
    }

    struct Pet: Codable, Equatable {
        var kind: String
        var name: String
        var age: Int?
    }
}
