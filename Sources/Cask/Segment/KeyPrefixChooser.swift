/// Chooses the key prefix a new segment's header names (FORMAT.md, "Segment files"): the leading
/// bytes that the keys written lately share most, so that records of keys like `drafts/000042/…`
/// or db_bench's zero-padded numbers store each key's distinct tail alone.
///
/// Owned by the writer, under its mutex. It keeps a sample of the keys put (one in
/// ``samplingInterval``, their first ``Limits/maxKeyPrefixLength`` bytes, the last ``sampleCount``
/// of them): O(1) per put and no allocation, 16 KiB. Choosing costs O(samples² · prefix) once per
/// segment.
package struct KeyPrefixChooser {
    /// One key in this many is sampled.
    static let samplingInterval = 16
    /// The keys the choice is made from.
    static let sampleCount = 64
    /// Fewer samples than this say too little: no prefix is chosen from them.
    static let minimumSamples = 8

    /// The samples, each in a slot of ``Limits/maxKeyPrefixLength`` bytes (allocated once: a put
    /// that samples allocates nothing), and their lengths.
    private var slots: [UInt8] = []
    private var lengths: [Int] = []
    private var next = 0
    private var countdown = 1

    /// A chooser that samples (`sampling`: its 16 KiB allocated now, so that no put allocates), or
    /// one that never does (a writer whose segments name no prefix).
    package init(sampling: Bool = true) {
        guard sampling else { return }
        slots = [UInt8](repeating: 0, count: Self.sampleCount * Limits.maxKeyPrefixLength)
        lengths.reserveCapacity(Self.sampleCount)
    }

    /// Notes a key put. O(1) but one put in ``samplingInterval``, whose key's first bytes are copied.
    @inline(__always)
    package mutating func note(_ key: UnsafeRawBufferPointer) {
        countdown -= 1
        guard countdown == 0 else { return }
        countdown = Self.samplingInterval
        let count = min(key.count, Limits.maxKeyPrefixLength)
        let slot = next
        next = (next + 1) % Self.sampleCount
        if lengths.count < Self.sampleCount { lengths.append(count) } else { lengths[slot] = count }
        slots.withUnsafeMutableBytes { slots in
            UnsafeMutableRawBufferPointer(rebasing: slots[(slot * Limits.maxKeyPrefixLength)...].prefix(count))
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: key.prefix(count)))
        }
    }

    /// Whether enough keys were sampled to choose from.
    package var hasEnoughSamples: Bool { lengths.count >= Self.minimumSamples }

    private var samples: [[UInt8]] {
        lengths.enumerated().map { slot, count in Array(slots[(slot * Limits.maxKeyPrefixLength)...].prefix(count)) }
    }

    /// The prefix that saves the sampled keys the most bytes, and what it saves a record on
    /// average; empty (saving 0) when no prefix saves any, or too few keys were sampled.
    package func choice() -> (prefix: [UInt8], savingPerRecord: Double) {
        guard hasEnoughSamples else { return ([], 0) }
        return Self.best(for: samples)
    }

    /// What a key prefix `prefix` saves the records of `keys`, in bytes: each elides the bytes it
    /// shares with it when they are at least 2, at the cost of their count's varint.
    package static func saving(of prefix: [UInt8], for keys: [[UInt8]]) -> Int {
        prefix.withUnsafeBytes { prefixBytes in
            keys.reduce(0) { total, key in
                key.withUnsafeBytes { keyBytes in
                    let elided = RecordEncoder.elidedLength(of: keyBytes, prefix: prefixBytes)
                    return elided == 0 ? total : total + elided - Varint.size(of: UInt64(elided))
                }
            }
        }
    }

    /// The best prefix for `keys`. The candidates are the prefixes two neighbouring keys share in
    /// byte order: a prefix longer than every such one is a single key's, and one between two of
    /// them saves no more than the longer.
    static func best(for keys: [[UInt8]]) -> (prefix: [UInt8], savingPerRecord: Double) {
        let sorted = keys.sorted { $0.lexicographicallyPrecedes($1) }
        var best: [UInt8] = [], bestSaving = 0
        var tried = Set<[UInt8]>()
        for (left, right) in zip(sorted, sorted.dropFirst()) {
            let shared = zip(left, right).prefix { $0 == $1 }.count
            guard shared >= 2 else { continue }
            let candidate = Array(left[0..<shared])
            guard tried.insert(candidate).inserted else { continue }
            let saving = saving(of: candidate, for: keys)
            if saving > bestSaving || (saving == bestSaving && candidate.count < best.count) {
                best = candidate
                bestSaving = saving
            }
        }
        return (best, keys.isEmpty ? 0 : Double(bestSaving) / Double(keys.count))
    }
}
