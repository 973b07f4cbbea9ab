/// How the one reader names the records of a batch that is not whole (FORMAT.md, "Batches").
extension SegmentReader {
    /// The damage of a batch that is not whole (``BatchAssembler/Commit/incomplete(found:expected:)``):
    /// its members found and its commit record at `commitAt`, as runs of adjacent records.
    /// `count`: the commit value's count when it was read (`.some(nil)`: it did not parse), nil when
    /// the commit comes from a hint entry, which holds no value.
    package static func incompleteBatch(
        found: [BatchAssembler.Member], expected: UInt64, commitSeq: UInt64, commitAt location: RecordLocation, count: UInt64??,
        in segmentPath: String
    ) -> [DamagedRange] {
        let commit = BatchAssembler.Member(key: [], type: .batch, seq: commitSeq, valueLength: 0, expiresAt: nil, location: location)
        let stated = count.map { " and a count of \($0.map(String.init) ?? "?")" } ?? ""
        return runs(of: found + [commit], in: segmentPath, reason: "of a batch of \(expected) whose commit record has \(found.count) of its members\(stated) (none applied)")
    }

    /// One damage range per run of adjacent records among `members` (in file order).
    static func runs(of members: [BatchAssembler.Member], in segmentPath: String, reason: String) -> [DamagedRange] {
        var ranges: [(start: Int64, end: Int64, records: Int)] = []
        for member in members.sorted(by: { $0.location.offset < $1.location.offset }) {
            let start = Int64(member.location.offset), end = start + Int64(member.location.length)
            if let last = ranges.last, last.end == start {
                ranges[ranges.count - 1].end = end
                ranges[ranges.count - 1].records += 1
            } else {
                ranges.append((start, end, 1))
            }
        }
        return ranges.map { range in
            DamagedRange(
                kind: .uncommittedBatch, file: segmentPath, segmentID: members.first.map { UInt64($0.location.segmentID) },
                offset: range.start, length: range.end - range.start,
                reason: "\(range.records) record\(range.records == 1 ? "" : "s") \(reason)")
        }
    }
}
