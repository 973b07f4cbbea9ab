/// Holds the members of an atomic batch while a segment is read, until the batch's commit record
/// shows up (FORMAT.md, "Batches"). Members whose commit never comes are never applied.
struct BatchAssembler {
    struct Member {
        var key: [UInt8]
        var type: RecordType
        var seq: UInt64
        var valueLength: Int
        var expiresAt: UInt64?
        var location: RecordLocation
    }

    private(set) var pending: [Member] = []

    mutating func hold(_ member: Member) {
        pending.append(member)
    }

    /// The members committed by a commit record of seq `commitSeq` for the batch starting at
    /// `firstSeq` (its members have seqs `firstSeq ..< commitSeq`), in write order.
    mutating func commit(firstSeq: UInt64, commitSeq: UInt64) -> [Member] {
        let committed = pending.filter { $0.seq >= firstSeq && $0.seq < commitSeq }
        pending.removeAll { $0.seq >= firstSeq && $0.seq < commitSeq }
        return committed
    }

    /// The batch a commit record commits: its first seq is the record's 8-byte key.
    static func firstSeq(ofCommitKey key: UnsafeRawBufferPointer) -> UInt64 {
        key.readLittleEndian(at: 0, as: UInt64.self)
    }
}
