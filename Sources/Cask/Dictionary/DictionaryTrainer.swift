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
