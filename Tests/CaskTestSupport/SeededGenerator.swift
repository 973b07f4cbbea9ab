/// A repeatable random number generator (SplitMix64) so failing runs can be replayed from a seed.
/// Tests print their seed; `CASK_TEST_SEED` overrides it.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public let seed: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    /// A generator seeded from `CASK_TEST_SEED` when set, else from `fallback`.
    public static func fromEnvironment(fallback: UInt64) -> SeededGenerator {
        if let text = getenvString("CASK_TEST_SEED"), let seed = UInt64(text) { return SeededGenerator(seed: seed) }
        return SeededGenerator(seed: fallback)
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}

#if canImport(Glibc)
import Glibc
#endif

func getenvString(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
