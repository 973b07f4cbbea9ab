/// Keys and values as LevelDB's db_bench makes them: 16-byte keys (the index zero-padded to 16
/// decimal digits) and values cut from a buffer of "compressible" pieces — half random printable
/// bytes, half a repeat of them — so LZ4 shrinks them to about 50%.
struct BenchmarkData {
    let count: Int
    let valueSize: Int
    private let values: [UInt8]
    private static let valueBufferSize = 1 << 20

    init(count: Int, valueSize: Int, seed: UInt64) {
        self.count = count
        self.valueSize = valueSize
        var rng = SplitMix(seed: seed)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(Self.valueBufferSize + valueSize)
        while buffer.count < Self.valueBufferSize {
            let randomLength = valueSize / 2
            let piece = (0..<randomLength).map { _ in UInt8(32 + rng.next() % 95) }
            var chunk = piece
            while chunk.count < valueSize { chunk.append(contentsOf: piece.prefix(valueSize - chunk.count)) }
            buffer.append(contentsOf: chunk)
        }
        values = buffer
    }

    /// The key for index `i`: 16 ASCII digits.
    func key(_ i: Int) -> [UInt8] {
        var key = [UInt8](repeating: UInt8(ascii: "0"), count: 16)
        var n = i
        var position = 15
        while n > 0 && position >= 0 {
            key[position] = UInt8(ascii: "0") + UInt8(n % 10)
            n /= 10
            position -= 1
        }
        return key
    }

    /// The value written for the `i`th operation.
    func value(_ i: Int) -> ArraySlice<UInt8> {
        // Whole pieces only, as db_bench's generator wraps to the start rather than straddle the end.
        let start = (i % (values.count / valueSize)) * valueSize
        return values[start..<(start + valueSize)]
    }

    /// A permutation of 0..<count (each key once, shuffled), deterministic for the seed.
    func shuffledIndices(seed: UInt64) -> [Int] {
        var rng = SplitMix(seed: seed)
        var indices = Array(0..<count)
        indices.shuffle(using: &rng)
        return indices
    }

    /// Uniformly random indices with replacement.
    func randomIndices(_ n: Int, seed: UInt64, range: Int? = nil) -> [Int] {
        var rng = SplitMix(seed: seed)
        let upper = range ?? count
        return (0..<n).map { _ in Int(rng.next() % UInt64(upper)) }
    }
}

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
