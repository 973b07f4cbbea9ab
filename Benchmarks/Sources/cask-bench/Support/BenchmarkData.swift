/// Keys and values as LevelDB's db_bench makes them: 16-byte keys (the index zero-padded to 16
/// decimal digits) and values cut from a buffer of "compressible" pieces — half random printable
/// bytes, half a repeat of them — so LZ4 or Snappy shrinks them to about 50%. Deterministic for
/// the seed, so every engine (each in its own process) writes exactly the same bytes.
///
/// Immutable after `init`; shared by the worker threads of the concurrent workloads.
final class BenchmarkData: @unchecked Sendable {
    let count: Int
    let valueSize: Int
    /// The value pieces, `valueSize` bytes each; never written after `init`.
    private let values: UnsafeMutableRawBufferPointer
    private let pieces: Int
    private static let valueBufferSize = 1 << 20

    init(count: Int, valueSize: Int, seed: UInt64) {
        self.count = count
        self.valueSize = valueSize
        var rng = SplitMix(seed: seed)
        pieces = max(1, Self.valueBufferSize / max(valueSize, 1))
        values = .allocate(byteCount: pieces * valueSize, alignment: 16)
        for piece in 0..<pieces {
            let start = piece * valueSize
            let randomLength = max(1, valueSize / 2)
            for n in 0..<randomLength where n < valueSize { values[start + n] = UInt8(32 + rng.next() % 95) }
            for n in randomLength..<max(randomLength, valueSize) { values[start + n] = values[start + (n - randomLength) % randomLength] }
        }
    }

    deinit { values.deallocate() }

    /// The value written by the `n`th operation of a workload (whole pieces, as db_bench wraps).
    /// The bytes stay valid as long as this object lives.
    ///
    /// A pointer rather than a closure (`withValue(n) { ... }`): a timed loop that lent the key and
    /// the value through closures retained and released this object and the engine on every
    /// operation (about 25 ns, 2.7% of a Cask put), a cost of the benchmark, not of any engine.
    @inline(__always)
    func value(_ n: Int) -> UnsafeRawBufferPointer {
        let start = (n % pieces) * valueSize
        return UnsafeRawBufferPointer(rebasing: values[start..<(start + valueSize)])
    }

    /// A permutation of 0..<count (each key once, shuffled), deterministic for the seed.
    func shuffledIndices(seed: UInt64) -> [Int] {
        var rng = SplitMix(seed: seed)
        var indices = Array(0..<count)
        indices.shuffle(using: &rng)
        return indices
    }

    /// `n` uniformly random indices in 0..<count, with replacement.
    func randomIndices(_ n: Int, seed: UInt64) -> [Int] {
        var rng = SplitMix(seed: seed)
        return (0..<n).map { _ in Int(rng.next() % UInt64(count)) }
    }

    /// The user data a workload of `n` puts hands to the store: keys plus values.
    func userBytes(_ n: Int) -> Int { n * (KeyBuffer.keyLength + valueSize) }
}

/// A reusable key buffer, one per thread, so building a key allocates nothing.
///
/// Building a key is part of every timed loop, for every engine alike, so it is kept cheap: the
/// two halves of the 16 digits are made side by side, two digits per step from a table (about
/// 10 ns, against about 40 ns one digit at a time), so that the loop's own cost dilutes the
/// engines' figures as little as it can.
final class KeyBuffer {
    static let keyLength = 16
    static let largestIndex = 9_999_999_999_999_999
    private let bytes: UnsafeMutableRawBufferPointer
    /// "00" to "99": entry `n` is the two ASCII digits of `n`, in memory order.
    private let digitPairs: UnsafeMutablePointer<UInt16>

    init() {
        bytes = .allocate(byteCount: Self.keyLength + 1, alignment: 8)
        bytes[Self.keyLength] = UInt8(ascii: ".")
        digitPairs = .allocate(capacity: 100)
        for n in 0..<100 {
            let pair = [UInt8(ascii: "0") + UInt8(n / 10), UInt8(ascii: "0") + UInt8(n % 10)]
            digitPairs[n] = pair.withUnsafeBytes { $0.load(as: UInt16.self) }
        }
    }

    deinit {
        bytes.deallocate()
        digitPairs.deallocate()
    }

    /// The key of index `i`: 16 ASCII digits, as db_bench's `%016d`. A missing key is db_bench's
    /// too: the same digits followed by a `.` (17 bytes, never written). The bytes are this
    /// buffer's: valid until its next `key` call (a pointer for the reason `BenchmarkData.value`
    /// gives).
    @inline(__always)
    func key(_ i: Int, missing: Bool = false) -> UnsafeRawBufferPointer {
        precondition(i >= 0 && i <= Self.largestIndex, "a key index has at most 16 digits")
        // Digits 0-7 and 8-15, each below 10^8, so 32-bit arithmetic; two digits per step.
        var high = UInt32(truncatingIfNeeded: i / 100_000_000), low = UInt32(truncatingIfNeeded: i % 100_000_000)
        let base = bytes.baseAddress!
        for pair in stride(from: 3, through: 0, by: -1) {
            base.storeBytes(of: digitPairs[Int(high % 100)], toByteOffset: 2 * pair, as: UInt16.self)
            base.storeBytes(of: digitPairs[Int(low % 100)], toByteOffset: 8 + 2 * pair, as: UInt16.self)
            high /= 100
            low /= 100
        }
        return UnsafeRawBufferPointer(start: base, count: missing ? Self.keyLength + 1 : Self.keyLength)
    }
}

/// The deterministic generator every workload draws from (SplitMix64).
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
