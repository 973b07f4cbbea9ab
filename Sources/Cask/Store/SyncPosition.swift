/// A point in the store's log: everything before `offset` in segment `segmentID`, and every
/// earlier segment. Group commit compares these to know whose writes a sync covered.
package struct SyncPosition: Comparable, Sendable {
    package var segmentID: UInt64
    package var offset: Int64

    package static func < (a: SyncPosition, b: SyncPosition) -> Bool {
        (a.segmentID, a.offset) < (b.segmentID, b.offset)
    }
}
