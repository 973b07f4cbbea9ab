/// A fast, seeded 64-bit hash of key bytes for the index (multiply-fold mixing, wyhash style).
/// Not cryptographic; the per-process random seed keeps crafted keys from colliding on purpose.
package struct KeyHasher: Sendable {
    private let seed: UInt64

    package init(seed: UInt64 = KeyHasher.processSeed()) { self.seed = seed }

    /// A random seed; in the fuzzing build a fixed one, so that every input replays the same way
    /// (which keys share a tag, and so which entries a probe meets first, depends on the seed).
    package static func processSeed() -> UInt64 {
        #if FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        return 0x5EED_CA5C_F022_1234
        #else
        return UInt64.random(in: .min ... .max)
        #endif
    }

    @inline(__always)
    private static func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let product = a.multipliedFullWidth(by: b)
        return product.high ^ product.low
    }

    @inline(__always)
    package func hash(_ key: UnsafeRawBufferPointer) -> UInt64 {
        let p0: UInt64 = 0xA076_1D64_78BD_642F, p1: UInt64 = 0xE703_7ED1_A0B4_28DB, p2: UInt64 = 0x8EBC_6AF0_9C88_C6E3
        var h = seed ^ Self.fold(seed ^ p0, UInt64(key.count) ^ p1)
        guard let base = key.baseAddress else { return Self.fold(h, p2) }
        var index = 0
        let count = key.count
        while count - index >= 16 {
            let a = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let b = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self))
            h = Self.fold(a ^ p1 ^ h, b ^ p2)
            index &+= 16  // Safe: bounded by count.
        }
        var a: UInt64 = 0, b: UInt64 = 0
        var shift: UInt64 = 0
        while index < count {
            let byte = UInt64(base.load(fromByteOffset: index, as: UInt8.self))
            if shift < 64 { a |= byte << shift } else { b |= byte << (shift - 64) }
            shift &+= 8
            index &+= 1
        }
        return Self.fold(Self.fold(a ^ p1 ^ h, b ^ p2), p0 ^ UInt64(count))
    }
}
