import XCTest
@testable import Cask
import CaskTestSupport

/// The zstd frames hint blocks are stored as (FORMAT.md, "Hint files", codec 2): what the
/// compressor writes comes back, and the decompressor takes exactly one frame that states the
/// block's length and names no dictionary — frames made by hand, each beside the same frame made
/// valid — and never writes outside its buffer, whatever the bytes.
final class ZstdCodecTests: XCTestCase {
    /// Decompresses into `count` bytes guarded on both sides (``writeGuarded(count:file:line:_:)``).
    private func expand(_ frame: [UInt8], count: Int, file: StaticString = #filePath, line: UInt = #line) -> [UInt8]? {
        frame.withUnsafeBytes { source in writeGuarded(count: count, file: file, line: line) { ZstdDecompressor.decompress(source, into: $0) } }
    }

    private func compress(_ value: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: ZstdCompressor.bound(value.count))
        let written = value.withUnsafeBytes { source in out.withUnsafeMutableBytes { ZstdCompressor().compress(source, into: $0) } }
        return written.map { Array(out.prefix($0)) }
    }

    /// A frame of one raw block (RFC 8878): magic, a frame header descriptor, then `header` (window
    /// descriptor, dictionary id, content size, as the descriptor says), a last raw block of `payload`.
    private func handMadeFrame(descriptor: UInt8, header: [UInt8], payload: [UInt8]) -> [UInt8] {
        let blockHeader = UInt32(1) | UInt32(payload.count) << 3  // last block, type raw, its size
        return [0x28, 0xB5, 0x2F, 0xFD, descriptor] + header
            + [UInt8(blockHeader & 0xFF), UInt8(blockHeader >> 8 & 0xFF), UInt8(blockHeader >> 16)] + payload
    }

    func testWhatItCompressesComesBack() {
        var rng = SeededGenerator(seed: 61)
        let values: [[UInt8]] = [
            [7], rng.bytes(100), rng.bytes(70_000), [UInt8](repeating: 3, count: 1 << 20),
            (0..<50_000).flatMap { Array("entry \($0 % 977);".utf8) },
        ]
        for value in values {
            guard let frame = compress(value) else { return XCTFail("\(value.count) bytes did not compress") }
            XCTAssertLessThanOrEqual(frame.count, ZstdCompressor.bound(value.count))
            XCTAssertEqual(expand(frame, count: value.count), value, "\(value.count) bytes")
            XCTAssertNil(expand(frame, count: value.count - 1), "a length one short")
            XCTAssertNil(expand(frame, count: value.count + 1), "a length one long")
        }
        // Too little room: nil, not a cut frame.
        let random = rng.bytes(1_000)
        var small = [UInt8](repeating: 0, count: 500)
        XCTAssertNil(random.withUnsafeBytes { source in small.withUnsafeMutableBytes { ZstdCompressor().compress(source, into: $0) } })
    }

    func testOnlyOneFrameStatingTheLengthWithNoDictionaryIsTaken() {
        let payload = Array("hint entries, raw".utf8)
        let n = UInt8(payload.count)
        // Single segment (0x20): no window descriptor, a 1-byte content size.
        let valid = handMadeFrame(descriptor: 0x20, header: [n], payload: payload)
        XCTAssertEqual(expand(valid, count: payload.count), payload, "the hand-made frame is valid")
        // No content size: a window descriptor instead (0x00), and no single segment.
        XCTAssertNil(expand(handMadeFrame(descriptor: 0x00, header: [0x00], payload: payload), count: payload.count), "no content size")
        XCTAssertNil(expand(handMadeFrame(descriptor: 0x20, header: [n - 1], payload: payload), count: payload.count), "another content size")
        XCTAssertNil(expand(handMadeFrame(descriptor: 0x20, header: [n - 1], payload: payload), count: payload.count - 1), "a frame longer than it says")
        // A 1-byte dictionary id (0x21): 7 is refused, 0 means none.
        XCTAssertNil(expand(handMadeFrame(descriptor: 0x21, header: [7, n], payload: payload), count: payload.count), "a dictionary id")
        XCTAssertEqual(expand(handMadeFrame(descriptor: 0x21, header: [0, n], payload: payload), count: payload.count), payload, "dictionary id 0")
        XCTAssertNil(expand(valid + [0], count: payload.count), "a byte after the frame")
        // A skippable frame (magic 0x184D2A50, 4 bytes of length, that many bytes) after it.
        XCTAssertNil(expand(valid + [0x50, 0x2A, 0x4D, 0x18, 1, 0, 0, 0, 9], count: payload.count), "a skippable frame after it")
        XCTAssertNil(expand(valid + valid, count: payload.count), "two frames")
        XCTAssertNil(expand(valid + valid, count: 2 * payload.count), "two frames, both lengths")
        XCTAssertNil(expand(Array(valid.dropLast()), count: payload.count), "a frame cut short")
        XCTAssertNil(expand([], count: payload.count), "no bytes")
    }

    /// Every byte flip and every cut of a compressed frame: refused or expanded within the buffer
    /// (a flip inside a block can give other bytes; a hint block's checksum catches those first).
    func testDamagedFramesStayInTheirBuffer() {
        let value = (0..<2_000).flatMap { Array("k\($0 % 97)/".utf8) }
        guard let frame = compress(value) else { return XCTFail("did not compress") }
        for index in frame.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = frame
                damaged[index] ^= mask
                if let expanded = expand(damaged, count: value.count), index < 4 {
                    XCTFail("a damaged magic number expanded to \(expanded.count) bytes")
                }
            }
        }
        for cut in 0..<frame.count { XCTAssertNil(expand(Array(frame.prefix(cut)), count: value.count), "cut at \(cut)") }
    }
}
