/// Where the latest record of a key lives: one `pread` of `length` bytes at `offset` of a segment.
package struct RecordLocation: Equatable, Hashable, Sendable {
    package var segmentID: UInt32
    package var offset: UInt32
    package var length: UInt32

    package init(segmentID: UInt32, offset: UInt32, length: UInt32) {
        self.segmentID = segmentID
        self.offset = offset
        self.length = length
    }
}
