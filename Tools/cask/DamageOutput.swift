import Cask

/// A damaged range as the JSON of every command that reports one shows it (`verify`, `compact`,
/// `recover`): the library's ``DamagedRange``, field for field.
struct DamageOutput: Encodable {
    /// record, segment-header, torn-tail, uncommitted-batch or compaction-manifest.
    var kind: String
    var file: String
    /// The segment's id; absent for the compaction manifest.
    var segment: UInt64?
    var offset: Int64
    var length: Int64
    var reason: String

    init(_ range: DamagedRange) {
        kind = range.kind.rawValue
        file = range.file
        segment = range.segmentID
        offset = range.offset
        length = range.length
        reason = range.reason
    }
}
