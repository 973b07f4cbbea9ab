import XCTest

/// Lets `write` fill `count` bytes in the middle of a larger buffer of guard bytes, and fails the
/// test when any guard byte changed, whatever `write` returned: for decoders handed damaged or
/// made-up input, which must never write outside their buffer. The bytes when `write` returns true.
package func writeGuarded(
    count: Int, file: StaticString = #filePath, line: UInt = #line, _ write: (UnsafeMutableRawBufferPointer) -> Bool
) -> [UInt8]? {
    var space = [UInt8](repeating: 0xA5, count: count + 64)
    let ok = space.withUnsafeMutableBytes { write(UnsafeMutableRawBufferPointer(rebasing: $0[32..<(32 + count)])) }
    XCTAssertTrue(space.prefix(32).allSatisfy { $0 == 0xA5 } && space.suffix(32).allSatisfy { $0 == 0xA5 }, "wrote outside its buffer", file: file, line: line)
    return ok ? Array(space[32..<(32 + count)]) : nil
}
