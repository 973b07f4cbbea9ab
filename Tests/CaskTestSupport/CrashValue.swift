/// The value `cask-crash-writer` puts for `key` at `version`, which the crash tests recompute to
/// recognise what they find: 0 to 2000 bytes, half of the values compressible.
public func crashValue(key: String, version: UInt64) -> [UInt8] {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325  // FNV-1a of the key
    for byte in key.utf8 {
        hash ^= UInt64(byte)
        hash &*= 0x0000_0100_0000_01B3
    }
    var random = SeededGenerator(seed: hash ^ (version &* 0x9E37_79B9_7F4A_7C15))
    let length = Int(random.next() % 2001)
    var value = [UInt8]()
    value.reserveCapacity(length)
    let compressible = random.next() % 2 == 0
    let pattern = random.next()
    while value.count < length {
        var word = compressible ? pattern : random.next()
        for _ in 0..<8 where value.count < length {
            value.append(UInt8(truncatingIfNeeded: word))
            word >>= 8
        }
    }
    return value
}
