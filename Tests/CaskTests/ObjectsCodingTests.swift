import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

// MARK: Models shared by the Objects tests

struct Nested: Codable, Equatable, Hashable, Sendable {
    var title: String
    var count: Int
}

/// Synthesized Codable of enums with associated values: a keyed container holding the case name.
enum Shape: Codable, Equatable, Sendable {
    case circle(radius: Double)
    case rect(Double, Double)
    case point
    case labeled(name: String, inner: Nested)
}

enum Color: String, Codable, Equatable, Sendable { case red, green, blue }
enum Level: Int, Codable, Equatable, Sendable { case low = 1, high = 200 }

/// One of every supported type.
struct Everything: Codable, Equatable, Sendable {
    var int = Int.min
    var int8 = Int8.min
    var int16 = Int16.max
    var int32 = Int32.min
    var int64 = Int64.max
    var int128 = Int128.min
    var uint = UInt.max
    var uint8 = UInt8.max
    var uint16: UInt16 = 300
    var uint32: UInt32 = 70_000
    var uint64 = UInt64.max
    var uint128 = UInt128.max
    var double = -1.5e300
    var float: Float = 3.25
    var bool = true
    var bool2 = false
    var string = "héllo, wörld 🌍\u{0}end"
    var longString = String(repeating: "x", count: 20_000)
    var data = Data([0, 1, 2, 255])
    var bytes: [UInt8] = Array(0...255)
    var date = Date(timeIntervalSince1970: 1_700_000_000.123)
    var url = URL(string: "https://example.com/a%20b?q=1#frag")!
    var uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
    var optionalSome: String? = "some"
    var optionalNone: Int?
    var optionalArray: [Int?] = [1, nil, 3]
    var array = [0, 1, -1, 27, 28, 127, 128, 300, -300, Int.max]
    var strings = ["", "a", String(repeating: "é", count: 100)]
    var nestedArrays: [[Double]] = [[], [1.5], [2, 3, .infinity, -.infinity, -0.0]]
    var set: Set<String> = ["x", "y", "z"]
    var stringDict = ["one": 1, "two": 2, "": 0]
    var intDict = [1: "a", -5: "b", Int.max: "c", Int.min: "d"]
    var uuidDict = [UUID(uuidString: "00000000-0000-0000-0000-000000000001")!: 1]
    var nestedDict: [String: [String: Nested]] = ["outer": ["inner": Nested(title: "t", count: 1)]]
    var nested = Nested(title: "nested", count: 42)
    var nestedOptional: Nested? = Nested(title: "opt", count: -1)
    var nestedArray = (0..<40).map { Nested(title: "item \($0)", count: $0) }
    var shapes: [Shape] = [.circle(radius: 2), .rect(3, 4), .point, .labeled(name: "n", inner: Nested(title: "i", count: 9))]
    var color = Color.green
    var level = Level.high
    var emptyArray: [Int] = []
    var emptyString = ""
    var emptyDict: [String: Int] = [:]
    var decimal = Decimal(string: "12345.678")!
    var tuple = Pair(first: 1, second: "2")
}

struct Pair: Codable, Equatable, Sendable {
    var first: Int
    var second: String
}

/// A user profile of ~10 fields with a nested array (the benchmark's model, too).
struct Profile: Codable, Equatable, Sendable {
    var id: Int
    var name: String
    var email: String
    var age: Int
    var verified: Bool
    var score: Double
    var createdAt: Date
    var avatar: URL?
    var tags: [String]
    var addresses: [Address]

    struct Address: Codable, Equatable, Sendable {
        var street: String
        var city: String
        var zip: String
    }

    static func sample(_ i: Int) -> Profile {
        Profile(
            id: i, name: "User \(i)", email: "user\(i)@example.com", age: 20 + i % 50, verified: i % 2 == 0,
            score: Double(i) * 1.5, createdAt: Date(timeIntervalSinceReferenceDate: 700_000_000 + Double(i)),
            avatar: URL(string: "https://example.com/avatars/\(i).png"), tags: ["swift", "cask", "tag\(i % 7)"],
            addresses: [Address(street: "\(i) Main St", city: "Springfield", zip: "12345"),
                        Address(street: "1 Side Rd", city: "Shelbyville", zip: "54321")])
    }
}

func binaryRoundTrip<T: Codable>(_ value: T) throws -> T {
    let bytes = try CaskBinaryEncoder().encode(value)
    return try CaskBinaryDecoder().decode(T.self, from: bytes)
}

// MARK: Tests

/// The binary coder: every supported type and nesting round-trips, the bytes are compact and exactly
/// as FORMAT.md says, and misuse of the Codable protocols is an error rather than bad bytes.
final class ObjectsCodingTests: XCTestCase {
    func testEverythingRoundTrips() throws {
        let value = Everything()
        XCTAssertEqual(try binaryRoundTrip(value), value)
        // The same encoder and decoder, reused, give the same results.
        let encoder = CaskBinaryEncoder(), decoder = CaskBinaryDecoder()
        let first = try encoder.encode(value)
        XCTAssertEqual(try encoder.encode(Nested(title: "other", count: 1)).count, 24)
        XCTAssertEqual(try encoder.encode(value), first)
        XCTAssertEqual(try decoder.decode(Everything.self, from: first), value)
        XCTAssertEqual(try decoder.decode(Everything.self, from: Data(first)), value)
        XCTAssertEqual(try decoder.decode(Everything.self, from: first[...]), value)
    }

    func testTopLevelValuesOfEveryKindRoundTrip() throws {
        XCTAssertEqual(try binaryRoundTrip(0), 0)
        XCTAssertEqual(try binaryRoundTrip(-1), -1)
        XCTAssertEqual(try binaryRoundTrip(Int64.min), Int64.min)
        XCTAssertEqual(try binaryRoundTrip(UInt64.max), UInt64.max)
        XCTAssertEqual(try binaryRoundTrip(Int128.max), Int128.max)
        XCTAssertEqual(try binaryRoundTrip(Int128(Int64.min) - 1), Int128(Int64.min) - 1)
        XCTAssertEqual(try binaryRoundTrip(UInt128(UInt64.max) + 1), UInt128(UInt64.max) + 1)
        // One encoding per integer, whatever its type: 2^64 − 1 is major 0 as an Int128 too.
        XCTAssertEqual(try CaskBinaryEncoder().encode(Int128(UInt64.max)), try CaskBinaryEncoder().encode(UInt64.max))
        XCTAssertEqual(try CaskBinaryEncoder().encode(Int128(-5)), try CaskBinaryEncoder().encode(-5))
        XCTAssertEqual(try CaskBinaryDecoder().decode(UInt64.self, from: try CaskBinaryEncoder().encode(Int128(UInt64.max))), .max)
        XCTAssertEqual(try binaryRoundTrip("text"), "text")
        XCTAssertEqual(try binaryRoundTrip(true), true)
        XCTAssertEqual(try binaryRoundTrip(Optional<Int>.none), Optional<Int>.none)
        XCTAssertEqual(try binaryRoundTrip(Optional(Optional(5))), Optional(Optional(5)))
        XCTAssertEqual(try binaryRoundTrip([[String: [Int]]]([["a": [1]], [:]])), [["a": [1]], [:]])
        XCTAssertEqual(try binaryRoundTrip(Shape.point), .point)
        XCTAssertEqual(try binaryRoundTrip(Color.blue), .blue)
        XCTAssertEqual(try binaryRoundTrip(Double.nan).isNaN, true)
        XCTAssertEqual(try binaryRoundTrip(Float.nan).isNaN, true)
        XCTAssertEqual(try binaryRoundTrip(-0.0).sign, .minus)
        XCTAssertEqual(try binaryRoundTrip(Float.leastNonzeroMagnitude), .leastNonzeroMagnitude)
        XCTAssertEqual(try binaryRoundTrip(Data()), Data())
        XCTAssertEqual(try binaryRoundTrip([UInt8]()), [])
    }

    func testContainersOfEverySizeClass() throws {
        // Lengths below 28 live in the tag; 28 and above take a varint of 1, 2 and 3 bytes.
        for length in [0, 1, 26, 27, 28, 29, 155, 156, 157, 16_411, 16_412, 16_413, 100_000] {
            let text = String(repeating: "a", count: length)
            XCTAssertEqual(try binaryRoundTrip(text), text, "\(length)")
            let bytes = [UInt8](repeating: 7, count: length)
            XCTAssertEqual(try binaryRoundTrip(bytes), bytes)
            let array = [UInt16](repeating: 9, count: length / 2)
            XCTAssertEqual(try binaryRoundTrip(array), array)
            let nested = [Pair(first: length, second: text)]
            XCTAssertEqual(try binaryRoundTrip(nested), nested)
        }
    }

    /// FORMAT.md's worked example, byte for byte.
    func testFormatExampleBytes() throws {
        struct Point: Codable { var x: Int; var y: Int; var label: String? }
        let bytes = try CaskBinaryEncoder().encode([Point(x: 1, y: -2, label: "a"), Point(x: 300, y: 0, label: nil)])
        XCTAssertEqual(bytes.map { String(format: "%02x", $0) }.joined(separator: " "), """
            01 8f a7 00 01 02 21 04 61 61 a6 00 1c 90 02 02 00 03 01 78 01 79 05 6c 61 62 65 6c
            """.replacingOccurrences(of: "\n", with: " "))
    }

    func testFieldNamesAreStoredOncePerRecord() throws {
        let profiles = (0..<100).map(Profile.sample)
        let binary = try CaskBinaryEncoder().encode(profiles)
        let json = try JSONEncoder().encode(profiles)
        let occurrences = binary.indices.filter { binary[$0...].starts(with: Array("createdAt".utf8)) }.count
        XCTAssertEqual(occurrences, 1)
        XCTAssertLessThan(binary.count * 3, json.count * 2, "binary \(binary.count) bytes, JSON \(json.count)")
        XCTAssertEqual(try CaskBinaryDecoder().decode([Profile].self, from: binary), profiles)
        // Small integers are one byte; a UUID is 17, not a 36-character string.
        XCTAssertEqual(try CaskBinaryEncoder().encode(5), [0x01, 0x05, 0x00])
        XCTAssertEqual(try CaskBinaryEncoder().encode(UUID()).count, 1 + 17 + 1)
    }

    func testClassHierarchiesSharingTheEncoderAndUsingSuperEncoder() throws {
        XCTAssertEqual(try binaryRoundTrip(Dog(name: "Rex", breed: "collie")), Dog(name: "Rex", breed: "collie"))
        XCTAssertEqual(try binaryRoundTrip(Cat(name: "Tom", lives: 9)), Cat(name: "Tom", lives: 9))
        XCTAssertEqual(try binaryRoundTrip(HandWritten(a: 1, b: ["x", "y"], c: Nested(title: "c", count: 3))),
                       HandWritten(a: 1, b: ["x", "y"], c: Nested(title: "c", count: 3)))
    }

    func testSuperDecoderPathsAndMissingSuper() throws {
        struct CatWithoutName: Encodable {
            struct Empty: Encodable {}
            var lives = 3
            var `super` = Empty()
        }
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([Cat].self, from: try CaskBinaryEncoder().encode([CatWithoutName()]))) { error in
            guard case DecodingError.keyNotFound(let key, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(key.stringValue, "name")
            XCTAssertEqual(describeCodingPath(context.codingPath), "[0].super")
        }
        // No `super` at all: the super decoder reads a null, so its keyed container is missing.
        XCTAssertThrowsError(try CaskBinaryDecoder().decode(Cat.self, from: try CaskBinaryEncoder().encode(["lives": 3]))) { error in
            guard case DecodingError.valueNotFound(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(describeCodingPath(context.codingPath), "super")
        }
    }

    func testInterleavedContainersAreAnErrorNotBadBytes() throws {
        XCTAssertThrowsError(try CaskBinaryEncoder().encode(Interleaved())) { error in
            guard case EncodingError.invalidValue(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(context.debugDescription.contains("writes containers in order"), context.debugDescription)
            XCTAssertEqual(describeCodingPath(context.codingPath), "first[0]")
        }
        // The encoder is fine afterwards.
        let encoder = CaskBinaryEncoder()
        _ = try? encoder.encode(Interleaved())
        XCTAssertEqual(try CaskBinaryDecoder().decode(Nested.self, from: try encoder.encode(Nested(title: "ok", count: 1))), Nested(title: "ok", count: 1))
    }

    func testDepthLimit() throws {
        var deep = Chain(next: nil)
        for _ in 0..<255 { deep = Chain(next: deep) }
        XCTAssertNoThrow(try binaryRoundTrip(deep))  // 256 nested containers
        deep = Chain(next: deep)
        XCTAssertThrowsError(try CaskBinaryEncoder().encode(deep)) { error in
            guard case EncodingError.invalidValue(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(context.debugDescription.contains("nested more than 256"), context.debugDescription)
        }
    }

    func testValuesThatEncodeNothingReadBackAsEmpty() throws {
        XCTAssertEqual(try binaryRoundTrip([Silent(), Silent()]).count, 2)
        XCTAssertEqual(try CaskBinaryEncoder().encode(Silent()), [0x01, 0xA0, 0x00])
    }

    func testTypeMismatchesNameTheCodingPath() throws {
        let bytes = try CaskBinaryEncoder().encode(["items": [Pair(first: 1, second: "x")]])
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([String: [Nested]].self, from: bytes)) { error in
            guard case DecodingError.keyNotFound(let key, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(key.stringValue, "title")
            XCTAssertEqual(describeCodingPath(context.codingPath), "items[0]")
        }
        struct WrongType: Decodable { var first: String }
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([String: [WrongType]].self, from: bytes)) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(describeCodingPath(context.codingPath), "items[0].first")
            XCTAssertEqual(context.debugDescription, "expected a String, found an integer")
        }
        struct Narrow: Decodable { var first: Int8 }
        let big = try CaskBinaryEncoder().encode(Pair(first: 300, second: ""))
        XCTAssertThrowsError(try CaskBinaryDecoder().decode(Narrow.self, from: big)) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(context.debugDescription.contains("does not fit in Int8"), context.debugDescription)
        }
        XCTAssertThrowsError(try CaskBinaryDecoder().decode(Int.self, from: try CaskBinaryEncoder().encode(Int?.none))) { error in
            guard case DecodingError.valueNotFound = error else { return XCTFail("\(error)") }
        }
    }

    /// `[String]`, `[Int]` and `[Double]` take a shortcut past the protocols; it must read and
    /// fail exactly like the general path.
    func testArrayShortcutsMatchTheGeneralPath() throws {
        struct Lists: Codable, Equatable {
            var strings: [String]
            var ints: [Int]
            var doubles: [Double]
            var nested: [[String]]
        }
        let lists = Lists(strings: ["a", "", "é"], ints: [0, -1, .max, .min], doubles: [1.5, -0.0, .infinity], nested: [["x"], []])
        XCTAssertEqual(try binaryRoundTrip(lists), lists)
        // The same bytes as the general path writes: [Int16] goes through Array.encode(to:).
        XCTAssertEqual(Array(try CaskBinaryEncoder().encode([1, 2, 300]).dropFirst()), Array(try CaskBinaryEncoder().encode([Int16(1), 2, 300]).dropFirst()))
        // Widening through the shortcut: integers read as Doubles, Float32 as Double.
        XCTAssertEqual(try CaskBinaryDecoder().decode([Double].self, from: try CaskBinaryEncoder().encode([Float(1.5)])), [1.5])
        XCTAssertEqual(try CaskBinaryDecoder().decode([Double].self, from: try CaskBinaryEncoder().encode([Int32(7)])), [7])
        // An element of the wrong type is named by its index.
        struct Mixed: Encodable {
            func encode(to encoder: any Encoder) throws {
                var container = encoder.unkeyedContainer()
                try container.encode("a")
                try container.encode(2)
            }
        }
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([String: [String]].self, from: try CaskBinaryEncoder().encode(["list": Mixed()]))) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(describeCodingPath(context.codingPath), "list[1]")
            XCTAssertEqual(context.debugDescription, "expected a String, found an integer")
        }
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([Int8].self, from: try CaskBinaryEncoder().encode([1, 1000]))) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(describeCodingPath(context.codingPath), "[1]")
        }
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([Int].self, from: try CaskBinaryEncoder().encode(["x": 1]))) { error in
            guard case DecodingError.typeMismatch = error else { return XCTFail("\(error)") }
        }
    }

    /// Arrays of any other element type are read and written by the coder itself, past
    /// `Array.init(from:)` and `Array.encode(to:)`: the bytes, the values and the errors must be
    /// those of the general path (an unkeyed container, element by element).
    func testArraysOfAnyElementMatchTheGeneralPath() throws {
        func check<Element: Codable & Equatable>(_ elements: [Element], line: UInt = #line) throws {
            let shortcut = try CaskBinaryEncoder().encode(elements)
            let general = try CaskBinaryEncoder().encode(ThroughUnkeyed(elements))
            XCTAssertEqual(shortcut, general, "the bytes differ", line: line)
            XCTAssertEqual(try CaskBinaryDecoder().decode([Element].self, from: general), elements, line: line)
            XCTAssertEqual(try CaskBinaryDecoder().decode(ThroughUnkeyed<Element>.self, from: shortcut).elements, elements, line: line)
            // Inside a keyed container too, where the array is a field among others.
            let wrapped = ["before": [Element](), "list": elements, "after": elements.reversed()]
            XCTAssertEqual(try binaryRoundTrip(wrapped), wrapped, line: line)
        }
        try check([Nested]())
        try check([Nested(title: "one", count: 1)])
        try check((0..<10_000).map { Nested(title: "item \($0)", count: $0) })  // a length of several varint bytes
        try check([Nested?.none, Nested(title: "b", count: 2), nil])
        try check([[Nested](), [Nested(title: "x", count: -1)], []])
        try check([[[Nested(title: "deep", count: 3)]]])
        try check([Shape.circle(radius: 1), .point, .labeled(name: "l", inner: Nested(title: "i", count: 0))])
        try check([Int16(1), -2, .max])  // integers of other widths: element by element
        try check([Set(["a"]), []])
        try check([Profile.sample(1), Profile.sample(2)])
        // An element that fails is named by its index, under the array's key.
        struct Counted: Codable { var count: Int8 }
        let bytes = try CaskBinaryEncoder().encode(["lists": [[Nested(title: "a", count: 1)], [Nested(title: "b", count: 2), Nested(title: "c", count: 300)]]])
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([String: [[Counted]]].self, from: bytes)) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(describeCodingPath(context.codingPath), "lists[1][1].count")
        }
        // A null where an array of structs is expected reads as the general path reads it.
        XCTAssertThrowsError(try CaskBinaryDecoder().decode([String: [Nested]].self, from: try CaskBinaryEncoder().encode(["list": [Nested]?.none]))) { error in
            guard case DecodingError.valueNotFound(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(describeCodingPath(context.codingPath), "list")
        }
        // Nesting is limited on the shortcut as on the general path.
        XCTAssertThrowsError(try CaskBinaryEncoder().encode(ArrayTower(depth: 257))) { error in
            guard case EncodingError.invalidValue(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(context.debugDescription.contains("nested more than 256"), context.debugDescription)
        }
        XCTAssertEqual(try binaryRoundTrip(ArrayTower(depth: 256)), ArrayTower(depth: 256))
    }

    func testUserInfoReachesTheModel() throws {
        let key = CodingUserInfoKey(rawValue: "unit")!
        let encoder = CaskBinaryEncoder()
        encoder.userInfo[key] = "cm"
        let decoder = CaskBinaryDecoder()
        decoder.userInfo[key] = "mm"
        let bytes = try encoder.encode(Measured(value: 5))
        XCTAssertEqual(try decoder.decode(Measured.self, from: bytes).unit, "cm>mm")
    }

    func testKeyedAccessOutOfOrderAndAllKeys() throws {
        let dict = Dictionary(uniqueKeysWithValues: (0..<500).map { ("key\($0)", $0) })
        XCTAssertEqual(try binaryRoundTrip(dict), dict)
        let ints = Dictionary(uniqueKeysWithValues: (0..<500).map { ($0 * 7919 - 100_000, "\($0)") })
        XCTAssertEqual(try binaryRoundTrip(ints), ints)
        XCTAssertEqual(try binaryRoundTrip(Backwards(a: 1, b: 2, c: 3, d: nil)), Backwards(a: 1, b: 2, c: 3, d: nil))
    }
}

// MARK: Models exercising the corners of Codable

class Animal: Codable, Equatable {
    var name: String
    init(name: String) { self.name = name }
    static func == (lhs: Animal, rhs: Animal) -> Bool { lhs.name == rhs.name && type(of: lhs) == type(of: rhs) && lhs.isEqual(rhs) }
    func isEqual(_ other: Animal) -> Bool { true }
}

/// A subclass encoding into the container its superclass started, through the same encoder.
final class Dog: Animal {
    var breed: String
    init(name: String, breed: String) {
        self.breed = breed
        super.init(name: name)
    }
    enum CodingKeys: String, CodingKey { case breed }
    required init(from decoder: any Decoder) throws {
        breed = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .breed)
        try super.init(from: decoder)
    }
    override func encode(to encoder: any Encoder) throws {
        try super.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(breed, forKey: .breed)
    }
    override func isEqual(_ other: Animal) -> Bool { (other as? Dog)?.breed == breed }
}

/// A subclass encoding its superclass under `super`.
final class Cat: Animal {
    var lives: Int
    init(name: String, lives: Int) {
        self.lives = lives
        super.init(name: name)
    }
    enum CodingKeys: String, CodingKey { case lives }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        lives = try container.decode(Int.self, forKey: .lives)
        try super.init(from: container.superDecoder())
    }
    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(lives, forKey: .lives)
        try super.encode(to: container.superEncoder())
    }
    override func isEqual(_ other: Animal) -> Bool { (other as? Cat)?.lives == lives }
}

/// Nested containers, unkeyed containers of mixed values, written by hand.
struct HandWritten: Codable, Equatable {
    var a: Int
    var b: [String]
    var c: Nested
    enum Keys: String, CodingKey { case a, inner }
    enum InnerKeys: String, CodingKey { case list, c }
    init(a: Int, b: [String], c: Nested) { self.a = a; self.b = b; self.c = c }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(a, forKey: .a)
        var inner = container.nestedContainer(keyedBy: InnerKeys.self, forKey: .inner)
        var list = inner.nestedUnkeyedContainer(forKey: .list)
        try list.encode(b.count)
        for item in b { try list.encode(item) }
        var more = list.nestedContainer(keyedBy: InnerKeys.self)
        try more.encode(c, forKey: .c)
    }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        a = try container.decode(Int.self, forKey: .a)
        let inner = try container.nestedContainer(keyedBy: InnerKeys.self, forKey: .inner)
        var list = try inner.nestedUnkeyedContainer(forKey: .list)
        let count = try list.decode(Int.self)
        XCTAssertEqual(list.count, count + 2)
        b = try (0..<count).map { _ in try list.decode(String.self) }
        c = try list.nestedContainer(keyedBy: InnerKeys.self).decode(Nested.self, forKey: .c)
        XCTAssertTrue(list.isAtEnd)
    }
}

/// Writes into a container after a sibling container started: cannot stream.
struct Interleaved: Encodable {
    enum Keys: String, CodingKey { case first, second }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        var first = container.nestedUnkeyedContainer(forKey: .first)
        var second = container.nestedUnkeyedContainer(forKey: .second)
        try second.encode(2)
        try first.encode(1)
    }
}

final class Chain: Codable {
    var next: Chain?
    init(next: Chain?) { self.next = next }
}

struct Silent: Codable {
    init() {}
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
}

struct Measured: Codable {
    var value: Int
    var unit = ""
    init(value: Int) { self.value = value }
    enum CodingKeys: String, CodingKey { case value, unit }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(value, forKey: .value)
        try container.encode(encoder.userInfo[CodingUserInfoKey(rawValue: "unit")!] as? String ?? "?", forKey: .unit)
    }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        value = try container.decode(Int.self, forKey: .value)
        unit = try container.decode(String.self, forKey: .unit) + ">" + (decoder.userInfo[CodingUserInfoKey(rawValue: "unit")!] as? String ?? "?")
    }
}

/// Decodes its fields in the reverse of the order they are written.
struct Backwards: Codable, Equatable {
    var a: Int, b: Int, c: Int, d: Int?
    enum CodingKeys: String, CodingKey { case a, b, c, d }
    init(a: Int, b: Int, c: Int, d: Int?) { self.a = a; self.b = b; self.c = c; self.d = d }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        d = try container.decodeIfPresent(Int.self, forKey: .d)
        c = try container.decode(Int.self, forKey: .c)
        XCTAssertTrue(container.contains(.b))
        b = try container.decode(Int.self, forKey: .b)
        a = try container.decode(Int.self, forKey: .a)
        XCTAssertEqual(container.allKeys.map(\.stringValue), ["a", "b", "c"])
    }
}

/// Its elements through an unkeyed container, one by one: the general path that the coder's own
/// handling of arrays must match.
struct ThroughUnkeyed<Element: Codable>: Codable {
    var elements: [Element]

    init(_ elements: [Element]) { self.elements = elements }

    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        var elements: [Element] = []
        while !container.isAtEnd { elements.append(try container.decode(Element.self)) }
        self.elements = elements
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        for element in elements { try container.encode(element) }
    }
}

/// Arrays of arrays around an integer, `depth` containers deep: each level an array of one element.
struct ArrayTower: Codable, Equatable {
    indirect enum Level: Codable, Equatable {
        case leaf(Int)
        case array([Level])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let leaf = try? container.decode(Int.self) { self = .leaf(leaf) } else { self = .array(try container.decode([Level].self)) }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .leaf(let value): try container.encode(value)
            case .array(let levels): try container.encode(levels)
            }
        }
    }

    var levels: [Level]

    init(depth: Int) {
        var level = Level.leaf(depth)
        for _ in 1..<depth { level = .array([level]) }
        levels = [level]
    }

    init(from decoder: any Decoder) throws { levels = try [Level](from: decoder) }
    func encode(to encoder: any Encoder) throws { try levels.encode(to: encoder) }
}
