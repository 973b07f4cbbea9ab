import CZstd

/// Trains LZ4 dictionary content from sample values with zstd's trainer (`ZDICT_trainFromBuffer`,
/// the system libzstd): it picks the byte strings that recur most across the samples and lays them
/// out with the most useful last, which is also the part LZ4 matches most cheaply.
///
/// zstd's dictionaries begin with a header and entropy tables that only zstd reads; the trainer
/// keeps the content after them, at most ``DictionaryFile/maxContentLength`` bytes.
///
/// Thread-safe (no shared state). Training costs about a second per 10 MB of samples on one core
/// and about 6 MB of memory beyond the samples.
package enum DictionaryTrainer {
    /// The least share of the bytes a dictionary must save on values it was not trained on
    /// (against LZ4 alone, incompressible values counted raw) to be used: below it the extra
    /// compression time (about 0.1 µs per 100-byte value) buys too little.
    package static let minimumGain = 0.10

    /// What training on `samples` gives: the content, and the share of the bytes it saves on the
    /// last tenth of the samples, which are held out of the training.
    package struct Outcome {
        package var content: [UInt8]
        package var gain: Double
    }

    /// Trains on the first nine tenths of the samples and measures the result on the last tenth;
    /// nil when there is nothing to learn.
    package static func trainAndMeasure(samples: [UInt8], sizes: [Int]) -> Outcome? {
        let heldOut = max(1, sizes.count / 10)
        let trainingCount = sizes.count - heldOut
        let trainingBytes = sizes[0..<trainingCount].reduce(0, +)
        guard let content = train(samples: Array(samples[0..<trainingBytes]), sizes: Array(sizes[0..<trainingCount])) else { return nil }
        let dictionary = content.withUnsafeBytes { LZ4Dictionary(content: $0) }
        let compressor = LZ4Compressor()
        var plain = 0, withDictionary = 0, start = trainingBytes
        var output = [UInt8](repeating: 0, count: LZ4Compressor.bound(DictionaryOptions.sampleLimit))
        samples.withUnsafeBytes { all in
            output.withUnsafeMutableBytes { space in
                for size in sizes[trainingCount...] {
                    let value = UnsafeRawBufferPointer(rebasing: all[start..<(start + size)])
                    start += size
                    plain += min(size, compressor.compress(value, into: space) ?? size)
                    withDictionary += min(size, compressor.compress(value, into: space, dictionary: dictionary) ?? size)
                }
            }
        }
        return Outcome(content: content, gain: plain == 0 ? 0 : 1 - Double(withDictionary) / Double(plain))
    }

    /// Trained content for `samples`, the values laid end to end, `sizes[i]` bytes each; nil when
    /// the samples are too few or too alike to learn anything from (zstd reports an error).
    package static func train(samples: [UInt8], sizes: [Int], capacity: Int = DictionaryFile.maxContentLength) -> [UInt8]? {
        guard sizes.count >= 8, sizes.reduce(0, +) == samples.count, capacity > 0 else { return nil }
        // Room for zstd's header and tables, which are cut off below.
        let room = capacity + 8192
        var trained = [UInt8](repeating: 0, count: room)
        let widths = sizes.map { Int($0) }
        let produced = trained.withUnsafeMutableBytes { output in
            samples.withUnsafeBytes { input in
                widths.withUnsafeBufferPointer { lengths in
                    ZDICT_trainFromBuffer(output.baseAddress, room, input.baseAddress, lengths.baseAddress, UInt32(lengths.count))
                }
            }
        }
        guard ZDICT_isError(produced) == 0, produced > 0 else { return nil }
        let header = trained.withUnsafeBytes { ZDICT_getDictHeaderSize($0.baseAddress, produced) }
        guard ZDICT_isError(header) == 0, header < produced else { return nil }
        let content = trained[header..<produced].suffix(capacity)
        return content.isEmpty ? nil : Array(content)
    }
}
