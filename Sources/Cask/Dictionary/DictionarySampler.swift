/// Collects the values a writer puts, as samples to train a dictionary from
/// (``DictionaryOptions/trainingSampleBytes``). Owned by the writer, under its mutex.
package struct DictionarySampler {
    package private(set) var samples: [UInt8] = []
    package private(set) var sizes: [Int] = []
    let target: Int

    package init(target: Int) {
        self.target = target
        samples.reserveCapacity(min(target, 1 << 20))
    }

    /// Whether enough has been collected to train.
    package var isFull: Bool { samples.count >= target }

    /// Takes a sample of a value the writer compresses (at most 16 KiB of it). O(sample).
    @inline(__always)
    package mutating func add(_ value: UnsafeRawBufferPointer) {
        guard value.count >= RecordEncoder.minimumCompressibleLength, !isFull else { return }
        let taken = min(value.count, DictionaryOptions.sampleLimit)
        samples.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[0..<taken]))
        sizes.append(taken)
    }
}
