/// Whether the values a writer puts still suit the store's dictionary: it compares how well the
/// dictionary compresses them, window by window, with how well it did on the samples it was
/// measured on. When a window of ``DictionaryOptions/trainingSampleBytes`` of values compresses a
/// quarter worse than that, the data has drifted: the writer samples again, and trains a new
/// dictionary, used only if it saves ``DictionaryTrainer/minimumGain`` more than the current one.
/// Owned by the writer, under its mutex; two additions per put.
package struct DictionaryDrift {
    /// Payload bytes per value byte the dictionary gave when it was chosen; nil until the first
    /// window sets it (a dictionary found at open).
    private var expected: Double?
    private let window: Int
    private var valueBytes = 0
    private var storedBytes = 0

    package init(expectedRatio: Double?, window: Int) {
        expected = expectedRatio
        self.window = max(window, 1 << 16)
    }

    /// Counts one compressible value (32 bytes and up) and the bytes its payload took; true when
    /// the window it completes shows drift.
    @inline(__always)
    package mutating func note(valueLength: Int, storedLength: Int) -> Bool {
        valueBytes += valueLength
        storedBytes += storedLength
        guard valueBytes >= window else { return false }
        let ratio = Double(storedBytes) / Double(valueBytes)
        valueBytes = 0
        storedBytes = 0
        guard let expected else {
            self.expected = ratio
            return false
        }
        return ratio > expected * 1.25 + 0.01
    }
}
