import XCTest
@testable import Cask
import CaskTestSupport

/// The read path's LZ4 expander against liblz4: the same bytes for every block liblz4 writes, and
/// no damaged or made-up block accepted that liblz4 rejects (or expanded differently).
final class LZ4BlockExpanderTests: XCTestCase {
    private func compress(_ value: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: LZ4Compressor.bound(value.count))
        let written = value.withUnsafeBytes { source in out.withUnsafeMutableBytes { LZ4Compressor().compress(source, into: $0) } }
        return written.map { Array(out.prefix($0)) }
    }

    /// Expands with the expander into `count` bytes guarded on both sides (``writeGuarded(count:file:line:_:)``).
    private func expand(_ block: [UInt8], count: Int, file: StaticString = #filePath, line: UInt = #line) -> [UInt8]? {
        block.withUnsafeBytes { source in writeGuarded(count: count, file: file, line: line) { LZ4BlockExpander.expand(source, into: $0) } }
    }

    private func liblz4(_ block: [UInt8], count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        let ok = block.withUnsafeBytes { source in out.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0) } }
        return ok ? out : nil
    }

    private func values(_ rng: inout SeededGenerator) -> [[UInt8]] {
        var values: [[UInt8]] = []
        for _ in 0..<400 {
            let length = Int.random(in: 1...1200, using: &rng)
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: values.append([UInt8](repeating: UInt8.random(in: 0...255, using: &rng), count: length))
            case 1: values.append(rng.bytes(length))
            case 2: values.append(rng.bytes(length / 2) + [UInt8](repeating: 0x61, count: length - length / 2))  // the benchmark's values
            case 3:
                let period = rng.bytes(Int.random(in: 2...24, using: &rng))
                values.append((0..<length).map { period[$0 % period.count] })
            default:
                let words = ["cask ", "segment ", "record ", "index ", "compaction ", "{\"name\": ", "\"id\": 12, "]
                var text: [UInt8] = []
                while text.count < length { text += Array(words.randomElement(using: &rng)!.utf8) }
                values.append(Array(text.prefix(length)))
            }
        }
        return values
    }

    func testExpandsWhatLiblz4CompressesToTheSameBytes() throws {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x124)
        var compressedAny = 0
        for value in values(&rng) {
            guard let block = compress(value) else { continue }
            compressedAny += 1
            XCTAssertEqual(expand(block, count: value.count), value)
            XCTAssertEqual(liblz4(block, count: value.count), value)
            // Exactly that size: one byte more or less is an invalid block for it.
            XCTAssertNil(expand(block, count: value.count - 1))
            XCTAssertNil(expand(block, count: value.count + 1))
        }
        XCTAssertGreaterThan(compressedAny, 350)
    }

    func testAcceptsNoBlockLiblz4RejectsAndExpandsLikeIt() throws {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x125)
        var bothAccepted = 0, onlyLiblz4 = 0, tried = 0
        func check(_ block: [UInt8], count: Int) {
            tried += 1
            let ours = expand(block, count: count), theirs = liblz4(block, count: count)
            if let ours {
                XCTAssertEqual(ours, theirs, "block \(block) for \(count) bytes: liblz4 \(theirs == nil ? "rejects it" : "expands it differently")")
                bothAccepted += 1
            } else if theirs != nil {
                onlyLiblz4 += 1
            }
        }
        for value in values(&rng) {
            guard let block = compress(value) else { continue }
            for _ in 0..<20 {
                var damaged = block
                switch Int.random(in: 0..<4, using: &rng) {
                case 0:
                    for _ in 0..<Int.random(in: 1...3, using: &rng) {
                        damaged[Int.random(in: 0..<damaged.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                    }
                case 1: damaged.removeLast(Int.random(in: 1...damaged.count, using: &rng))
                case 2: damaged += rng.bytes(Int.random(in: 1...8, using: &rng))
                default: damaged[Int.random(in: 0..<damaged.count, using: &rng)] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
                }
                let count = Bool.random(using: &rng) ? value.count : Int.random(in: 0...(value.count + 20), using: &rng)
                check(damaged, count: count)
            }
        }
        // Made-up blocks: random bytes; and random sequences (offsets near or past what was
        // written, matches and literals near the end), tried at the size they spell out and next to it.
        for _ in 0..<10_000 {
            check(rng.bytes(Int.random(in: 1...40, using: &rng)), count: Int.random(in: 0...80, using: &rng))
        }
        for _ in 0..<10_000 {
            var block: [UInt8] = [], spelled = 0
            let sequences = Int.random(in: 1...4, using: &rng)
            for sequence in 0..<sequences {
                let literals = Int.random(in: 0...20, using: &rng), nibble = Int.random(in: 0...15, using: &rng)
                block.append(UInt8(min(literals, 15) << 4 | nibble))
                if literals >= 15 { block.append(UInt8(literals - 15)) }
                block += rng.bytes(literals)
                spelled += literals
                guard sequence < sequences - 1 else { break }
                // Not 0, which liblz4 1.9 takes (copying bytes not written yet) and the expander refuses.
                let offset = Int.random(in: 1...(spelled + 2), using: &rng)
                block += [UInt8(offset & 0xFF), UInt8(offset >> 8)]
                var length = nibble + 4
                if nibble == 15 {
                    let more = Int.random(in: 0...3, using: &rng)
                    block.append(UInt8(more))
                    length += more
                }
                spelled += length
            }
            check(block, count: spelled)
            check(block, count: max(0, spelled + Int.random(in: -3...3, using: &rng)))
        }
        XCTAssertGreaterThan(tried, 35_000)
        // The test must have seen accepted blocks beyond the valid ones.
        XCTAssertGreaterThan(bothAccepted, 1_000)
        // The expander may be stricter than liblz4 (a get then falls back to liblz4 through
        // `LZ4Decompressor`, which refuses offset 0 as the expander does). Rarely.
        XCTAssertLessThan(onlyLiblz4, tried / 200, "blocks liblz4 accepts that the expander rejects")
    }

    /// Blocks compressed against a dictionary (FORMAT.md, "Dictionary files"): the same bytes as
    /// `LZ4_decompress_safe_usingDict` for every block liblz4 writes, and for damaged and made-up
    /// blocks whose matches reach into the dictionary, nothing accepted that liblz4 rejects.
    func testWithADictionaryExpandsLikeLiblz4() throws {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x126)
        var text: [UInt8] = []
        let words = ["cask ", "segment ", "record ", "index ", "compaction ", "{\"name\": ", "\"id\": 12, ", "dictionary "]
        while text.count < 20_000 { text += Array(words.randomElement(using: &rng)!.utf8) + rng.bytes(Int.random(in: 0...3, using: &rng)) }
        let dictionary = text.withUnsafeBytes { LZ4Dictionary(content: $0) }
        let compressor = LZ4Compressor()
        func expandBoth(_ block: [UInt8], count: Int) -> (ours: [UInt8]?, theirs: [UInt8]?) {
            var theirs = [UInt8](repeating: 0, count: count)
            let ours = block.withUnsafeBytes { source in
                writeGuarded(count: count) { LZ4BlockExpander.expand(source, into: $0, dictionary: dictionary.content) }
            }
            let theirsOK = block.withUnsafeBytes { source in
                theirs.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0, dictionary: dictionary.content) }
            }
            return (ours, theirsOK ? theirs : nil)
        }
        var compressed = 0, bothAccepted = 0, onlyLiblz4 = 0, tried = 0
        func check(_ block: [UInt8], count: Int) {
            tried += 1
            let (ours, theirs) = expandBoth(block, count: count)
            if let ours {
                XCTAssertEqual(ours, theirs, "block \(block) for \(count) bytes")
                bothAccepted += 1
            } else if theirs != nil {
                onlyLiblz4 += 1
            }
        }
        for value in values(&rng) {
            var out = [UInt8](repeating: 0, count: LZ4Compressor.bound(value.count))
            guard let length = value.withUnsafeBytes({ source in out.withUnsafeMutableBytes { compressor.compress(source, into: $0, dictionary: dictionary) } })
            else { continue }
            let block = Array(out.prefix(length))
            compressed += 1
            let (ours, theirs) = expandBoth(block, count: value.count)
            XCTAssertEqual(ours, value)
            XCTAssertEqual(theirs, value)
            for _ in 0..<10 {
                var damaged = block
                damaged[Int.random(in: 0..<damaged.count, using: &rng)] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
                check(damaged, count: value.count)
            }
        }
        // Made-up blocks whose offsets reach anywhere up to past the dictionary's start.
        for _ in 0..<10_000 {
            var block: [UInt8] = [], spelled = 0
            let sequences = Int.random(in: 2...4, using: &rng)
            for sequence in 0..<sequences {
                let literals = Int.random(in: 0...14, using: &rng), nibble = Int.random(in: 0...14, using: &rng)
                block.append(UInt8(literals << 4 | nibble))
                block += rng.bytes(literals)
                spelled += literals
                guard sequence < sequences - 1 else { break }
                let offset = Int.random(in: 1...(spelled + dictionary.content.count + 2), using: &rng)
                block += [UInt8(offset & 0xFF), UInt8(offset >> 8)]
                spelled += nibble + 4
            }
            check(block, count: spelled)
        }
        XCTAssertGreaterThan(compressed, 350)
        XCTAssertGreaterThan(bothAccepted, 1_000)
        XCTAssertLessThan(onlyLiblz4, tried / 200, "blocks liblz4 accepts that the expander rejects")
    }

    /// A match offset of 0 is not LZ4 (issue 22, item 8): liblz4's decoder takes it, every Cask reader refuses it.
    func testAMatchOffsetOfZeroIsRefusedByEveryDecoder() {
        // One literal "a", a 4-byte match at the offset given, then 12 literals: 17 bytes.
        func block(offset: UInt8) -> [UInt8] { [0x10, 0x61, offset, 0x00, 0xC0] + Array("bcdefghijklm".utf8) }
        func decodes(_ bytes: [UInt8]) -> (liblz4: Bool, expander: Bool) {
            var output = [UInt8](repeating: 0, count: 17)
            let viaLiblz4 = bytes.withUnsafeBytes { source in output.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0) } }
            let viaExpander = bytes.withUnsafeBytes { source in output.withUnsafeMutableBytes { LZ4BlockExpander.expand(source, into: $0) } }
            return (viaLiblz4, viaExpander)
        }
        XCTAssertTrue(decodes(block(offset: 1)) == (true, true), "offset 1 is valid")
        XCTAssertTrue(decodes(block(offset: 0)) == (false, false), "offset 0")
        XCTAssertTrue(block(offset: 0).withUnsafeBytes { LZ4BlockExpander.hasZeroMatchOffset($0) })
        // With a dictionary: an offset reaching into the dictionary is valid, 0 is not.
        let dictionary = Array("cask segment record index ".utf8).withUnsafeBytes { LZ4Dictionary(content: $0) }
        func decodes(_ bytes: [UInt8], dictionary: LZ4Dictionary) -> (liblz4: Bool, expander: Bool) {
            var output = [UInt8](repeating: 0, count: 17)
            let viaLiblz4 = bytes.withUnsafeBytes { source in
                output.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0, dictionary: dictionary.content) }
            }
            let viaExpander = bytes.withUnsafeBytes { source in
                output.withUnsafeMutableBytes { LZ4BlockExpander.expand(source, into: $0, dictionary: dictionary.content) }
            }
            return (viaLiblz4, viaExpander)
        }
        XCTAssertTrue(decodes(block(offset: 1), dictionary: dictionary) == (true, true))
        XCTAssertTrue(decodes(block(offset: 9), dictionary: dictionary) == (true, true), "8 bytes back into the dictionary")
        XCTAssertTrue(decodes(block(offset: 0), dictionary: dictionary) == (false, false), "offset 0 with a dictionary")
    }
}
