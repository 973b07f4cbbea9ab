/// File names in a store directory:
/// `0000000001.cask` (segment 1), `0000000001.hint` (its hint file), `0000000001.dict` (dictionary 1),
/// `LOCK`, `REKEYED`.
package enum SegmentName {
    package static let segmentExtension = ".cask"
    package static let hintExtension = ".hint"
    package static let dictionaryExtension = ".dict"
    package static let lockFile = "LOCK"
    /// Left in a store by a key change (``CaskStore/rekey(at:from:to:progress:)``) until the old
    /// store, swapped out beside it, is deleted: its one line names that directory.
    package static let rekeyMarker = "REKEYED"
    /// The highest segment id (FORMAT.md, "Limits"): an id must fit the index's 32-bit field, and
    /// `UInt32.max` is kept free.
    package static let maxID = UInt64(UInt32.max) - 1

    package static func segment(_ id: UInt64) -> String { padded(id) + segmentExtension }
    package static func hint(_ id: UInt64) -> String { padded(id) + hintExtension }
    package static func dictionary(_ id: UInt64) -> String { padded(id) + dictionaryExtension }

    /// The segment id named by a segment file name, or nil for any other file.
    package static func segmentID(fromFileName name: String) -> UInt64? {
        guard name.hasSuffix(segmentExtension) else { return nil }
        let digits = name.dropLast(segmentExtension.count)
        guard digits.count == 10, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(digits)
    }

    private static func padded(_ id: UInt64) -> String {
        let digits = String(id)
        return String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }
}
