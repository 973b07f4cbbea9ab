import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Damaged coder bytes: every one is a thrown `DecodingError`, never a crash, a hang or a huge
/// allocation — hand-made attacks, every truncation and byte flip of valid encodings, and a
/// fuzz loop of random bytes and random mutations (bounded to a few seconds).
final class ObjectsCorruptionTests: XCTestCase {
    /// Decodes `bytes` as several types; returns how many attempts threw.
    @discardableResult
    private func decodeAll(_ bytes: [UInt8], decoder: CaskBinaryDecoder) -> Int {
        var thrown = 0
        if (try? decoder.decode(Everything.self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode(Profile.self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode([Profile].self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode([String: [Int]].self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode([Int: Shape].self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode(String.self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode([UUID: Date].self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode(Chain.self, from: bytes)) == nil { thrown += 1 }
        if (try? decoder.decode(Cat.self, from: bytes)) == nil { thrown += 1 }
        return thrown
    }

    private func assertCorrupt<T: Decodable>(_ bytes: [UInt8], as type: T.Type, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try CaskBinaryDecoder().decode(T.self, from: bytes), file: file, line: line) { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertTrue(context.debugDescription.contains(expected), context.debugDescription, file: file, line: line)
        }
    }

    func testHandMadeDamage() {
        assertCorrupt([], as: Int.self, "no bytes")
        assertCorrupt(Array("{\"a\":1}".utf8), as: Int.self, "is it JSON")
        assertCorrupt([0x01], as: Int.self, "the data ends where a value was expected")
        assertCorrupt([0x01, 0x05], as: Int.self, "malformed field id")
        assertCorrupt([0x01, 0x05, 0x00, 0x00], as: Int.self, "1 bytes follow the name table")
        // Tag arguments 29 to 31, the reserved major type 6 and unknown simple values.
        for tag: UInt8 in [0x1D, 0x1E, 0x1F, 0xC0, 0xDF, 0xE8, 0xFF] {
            assertCorrupt([0x01, tag, 0x00], as: Int.self, "invalid tag")
        }
        // A varint that is not in its shortest form, or overflows.
        assertCorrupt([0x01, 0x1C, 0x80, 0x00, 0x00], as: Int.self, "malformed varint")
        assertCorrupt([0x01, 0x1C] + [UInt8](repeating: 0xFF, count: 10) + [0x01, 0x00], as: UInt64.self, "malformed varint")
        // Lengths far beyond the input: refused before anything is sized from them.
        assertCorrupt([0x01, 0x7C, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0x00], as: String.self, "runs past the end")
        assertCorrupt([0x01, 0xBC, 0xFF, 0xFF, 0xFF, 0x7F, 0x00], as: [String: Int].self, "runs past the end")
        assertCorrupt([0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F], as: Int.self, "name table claims")
        assertCorrupt([0x01, 0x00, 0x01, 0x7F], as: Int.self, "a name of 127 bytes runs past the end")
        // A fixed-size value cut short.
        assertCorrupt([0x01, 0xE4, 0, 0, 0, 0x00], as: Double.self, "runs past the end")
        // A 128-bit integer that fits 64 bits (each integer has one encoding).
        assertCorrupt([0x01, 0xE6] + [UInt8](repeating: 0, count: 16) + [0x00], as: UInt128.self, "fits in 64 bits")
        assertCorrupt([0x01, 0xE7, 0xFF] + [UInt8](repeating: 0, count: 15) + [0x00], as: Int128.self, "fits in 64 bits")
        // Invalid UTF-8 in a string.
        assertCorrupt([0x01, 0x62, 0xC3, 0x28, 0x00], as: String.self, "not valid UTF-8")
        assertCorrupt([0x01, 0x00, 0x01, 0x02, 0xC3, 0x28], as: Int.self, "name 0 of the name table is not valid UTF-8")
        // A field id pointing past the name table.
        assertCorrupt([0x01, 0xA2, 0x08, 0x01, 0x00], as: [String: Int].self, "field id 8 refers to name 4, but the table has 0")
        // Damage in a field the model does not read is found all the same: the whole value is checked first.
        var damaged = try! CaskBinaryEncoder().encode(Pair(first: 1, second: "é"))
        damaged[damaged.firstIndex(of: 0xC3)!] = 0xFF
        assertCorrupt(damaged, as: Unread.self, "not valid UTF-8")
        // A structure nested too deep is refused even where no model would go.
        XCTAssertNoThrow(try CaskBinaryDecoder().decode(Unread.self, from: [0x01, 0x81, 0x80, 0x00]))
        var deep: [UInt8] = [0x80]
        for _ in 0..<300 {
            let tag: [UInt8] = deep.count < 28 ? [0x80 | UInt8(deep.count)] : [0x9C] + varint(UInt64(deep.count - 28))
            deep = tag + deep
        }
        assertCorrupt([0x01] + deep + [0x00], as: Unread.self, "nested more than 256 deep")
    }

    /// Nesting far deeper than the limit, built by hand: refused at the limit, not a stack overflow.
    /// The decoder's UTF-8 check (`UTF8Sequence`, shared with the tool; it allocates nothing) accepts exactly what the standard
    /// library's validation accepts: every sequence of one and two bytes, every three-byte
    /// sequence whose first byte is 0xE0 or above, and random longer ones around the edges of the
    /// multi-byte forms.
    func testUTF8CheckAgreesWithTheStandardLibrary() {
        func agrees(_ bytes: [UInt8]) -> Bool {
            let ours = bytes.withUnsafeBytes { UTF8Sequence.isValid($0) }
            return ours == (String(validating: bytes, as: UTF8.self) != nil)
        }
        var disagreements: [[UInt8]] = []
        for a in 0...255 {
            if !agrees([UInt8(a)]) { disagreements.append([UInt8(a)]) }
            for b in 0...255 where !agrees([UInt8(a), UInt8(b)]) { disagreements.append([UInt8(a), UInt8(b)]) }
        }
        for a in 0xE0...0xFF {  // the three-byte leads, and those that start no three-byte form
            for b in 0...255 {
                for c in stride(from: 0, through: 255, by: 1) where !agrees([UInt8(a), UInt8(b), UInt8(c)]) {
                    disagreements.append([UInt8(a), UInt8(b), UInt8(c)])
                }
            }
        }
        var random = SeededGenerator(seed: 0x0DF8)
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
        for _ in 0..<100_000 {
            let bytes = (0..<(1 + Int(random.next() % 9))).map { _ in interesting[Int(random.next() % UInt64(interesting.count))] }
            if !agrees(bytes) { disagreements.append(bytes) }
        }
        XCTAssertEqual(disagreements.count, 0, "first disagreements: \(disagreements.prefix(5))")
    }

    func testDeepNestingIsRefused() {
        for depth in [300, 100_000] {
            // Innermost first, built backwards: an empty array, then each level an array tag with
            // the length of what it holds (0x9C and a varint from 28 bytes on).
            var reversed: [UInt8] = [0x80]
            for _ in 0..<depth {
                let length = reversed.count
                if length < 28 {
                    reversed.append(0x80 | UInt8(length))
                } else {
                    var varint: [UInt8] = []
                    var rest = UInt64(length - 28)
                    while rest >= 0x80 { varint.append(UInt8(rest & 0x7F) | 0x80); rest >>= 7 }
                    varint.append(UInt8(rest))
                    reversed.append(contentsOf: varint.reversed())
                    reversed.append(0x9C)
                }
            }
            let value = Array(reversed.reversed())
            let bytes = [0x01] + value + [0x00]
            XCTAssertThrowsError(try CaskBinaryDecoder().decode(NestedArrays.self, from: bytes)) { error in
                guard case DecodingError.dataCorrupted(let context) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(context.debugDescription.contains("nested more than 256"), context.debugDescription)
            }
        }
    }

    func testEveryTruncationThrows() throws {
        let decoder = CaskBinaryDecoder()
        for value in [try CaskBinaryEncoder().encode(Profile.sample(3)), try CaskBinaryEncoder().encode(Everything())] {
            for length in 0..<value.count where length < 2000 || length % 97 == 0 {
                XCTAssertEqual(decodeAll(Array(value[..<length]), decoder: decoder), 9, "truncated to \(length) bytes")
            }
        }
    }

    func testEveryByteFlipIsSafe() throws {
        let decoder = CaskBinaryDecoder()
        let value = try CaskBinaryEncoder().encode(Profile.sample(7))
        var detected = 0
        for index in value.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = value
                damaged[index] ^= mask
                if (try? decoder.decode(Profile.self, from: damaged)) != Profile.sample(7) { detected += 1 }
                decodeAll(damaged, decoder: decoder)
            }
        }
        // Most flips are caught; the rest changed a value's contents (there is no checksum in the
        // coding: the store's records carry one).
        XCTAssertGreaterThan(detected, value.count * 3 / 2)
    }

    /// Random byte strings and random mutations of valid encodings, for a bounded time.
    func testFuzz() throws {
        var generator = SeededGenerator.fromEnvironment(fallback: 0x0B1EC75)
        print("ObjectsCorruptionTests.testFuzz seed \(generator.seed)")
        let decoder = CaskBinaryDecoder()
        let seeds: [[UInt8]] = try [
            CaskBinaryEncoder().encode(Everything()),
            CaskBinaryEncoder().encode((0..<5).map(Profile.sample)),
            CaskBinaryEncoder().encode([1: Shape.point, 2: .circle(radius: 1), 3: .labeled(name: "x", inner: Nested(title: "t", count: 1))]),
            CaskBinaryEncoder().encode(["a": [1, 2], "b": []]),
            CaskBinaryEncoder().encode(Cat(name: "c", lives: 3)),
        ]
        let deadline = Date().addingTimeInterval(3)
        var rounds = 0
        while Date() < deadline {
            rounds += 1
            let bytes: [UInt8]
            if rounds % 4 == 0 {
                // Random bytes, mostly starting with the version byte so they get past it.
                var random = generator.bytes(Int.random(in: 0...64, using: &generator))
                if !random.isEmpty && Bool.random(using: &generator) { random[0] = 0x01 }
                bytes = random
            } else {
                bytes = mutate(seeds[Int.random(in: 0..<seeds.count, using: &generator)], &generator)
            }
            decodeAll(bytes, decoder: decoder)
        }
        print("ObjectsCorruptionTests.testFuzz: \(rounds) inputs, seed \(generator.seed)")
        XCTAssertGreaterThan(rounds, 100)
    }

    private func mutate(_ input: [UInt8], _ generator: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &generator) where !bytes.isEmpty {
            let index = Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<7, using: &generator) {
            case 0: bytes[index] ^= UInt8(1) << UInt8.random(in: 0...7, using: &generator)
            case 1: bytes[index] = UInt8.random(in: 0...255, using: &generator)
            case 2: bytes.remove(at: index)
            case 3: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
            case 4: bytes[index] = [0x1C, 0x3C, 0x5C, 0x7C, 0x9C, 0xBC, 0xFF, 0x80][Int.random(in: 0..<8, using: &generator)]
            case 5:  // duplicate a range
                let end = min(bytes.count, index + Int.random(in: 1...16, using: &generator))
                bytes.insert(contentsOf: bytes[index..<end], at: index)
            default: bytes.removeSubrange(index..<min(bytes.count, index + Int.random(in: 1...8, using: &generator)))
            }
        }
        return bytes
    }
}

/// Reads nothing from its keyed container.
struct Unread: Decodable {
    init(from decoder: any Decoder) throws {}
}

func varint(_ value: UInt64) -> [UInt8] {
    var bytes: [UInt8] = []
    var rest = value
    while rest >= 0x80 { bytes.append(UInt8(rest & 0x7F) | 0x80); rest >>= 7 }
    bytes.append(UInt8(rest))
    return bytes
}

struct NestedArrays: Decodable {
    var levels: Int
    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        levels = container.isAtEnd ? 0 : try container.decode(NestedArrays.self).levels + 1
    }
}
