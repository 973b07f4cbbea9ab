/// Holds the members of atomic batches while a segment (or its hint file) is read, until each
/// batch's commit record shows up (FORMAT.md, "Batches"), and decides whether the batch is whole.
///
/// The one statement of the batch rules for every reader: a commit record of seq `c` whose key
/// names first seq `f` commits the members of seqs `f ..< c`; the batch is applied only when every
/// one of them was read, in the same segment. Members whose batch never completes are never applied.
package struct BatchAssembler {
    package struct Member {
        package var key: [UInt8]
        package var type: RecordType
        package var seq: UInt64
        package var valueLength: Int
        package var expiresAt: UInt64?
        package var location: RecordLocation
    }

    /// What a commit record does to the members held for its batch.
    package enum Commit {
        /// Every member is here: apply them, in this (write) order.
        case whole([Member])
        /// Some members are missing (lost in a damaged range): none may be applied. Holds the ones found.
        case incomplete(found: [Member], expected: UInt64)
    }

    package private(set) var pending: [Member] = []
    /// Whether `pending` is in increasing seq order, as every writer leaves it (seqs only grow in
    /// a segment): then a commit finds its members by binary search, in O(log pending + batch),
    /// however many orphaned members (of batches that never completed) are held before them.
    private var inSeqOrder = true

    package init() {}

    package mutating func hold(_ member: Member) {
        if let last = pending.last, last.seq >= member.seq { inSeqOrder = false }
        pending.append(member)
    }

    /// Takes the members that a commit record of seq `commitSeq` for the batch starting at
    /// `firstSeq` commits (seqs `firstSeq ..< commitSeq`), and says whether they are all there.
    /// `count`: the member count the commit record's value states, when the caller has it (a hint
    /// entry does not); a count that disagrees with the seqs makes the batch incomplete.
    package mutating func commit(firstSeq: UInt64, commitSeq: UInt64, count: UInt64? = nil) -> Commit {
        let members: [Member]
        if inSeqOrder {
            // A commit whose key (its first seq) is past its own seq commits nothing: an empty
            // range, as the filter below gives, never one whose bounds are reversed (a trap).
            let lower = firstIndex(withSeqAtLeast: firstSeq)
            let range = lower..<max(lower, firstIndex(withSeqAtLeast: commitSeq))
            members = Array(pending[range])
            pending.removeSubrange(range)
        } else {
            members = pending.filter { $0.seq >= firstSeq && $0.seq < commitSeq }
            pending.removeAll { $0.seq >= firstSeq && $0.seq < commitSeq }
            inSeqOrder = zip(pending, pending.dropFirst()).allSatisfy { $0.seq < $1.seq }
        }
        // Safe: a valid commit record's seq is at least 1; `firstSeq` may be anything its key says.
        let expected = firstSeq < commitSeq ? commitSeq - firstSeq : 0
        guard expected > 0, UInt64(members.count) == expected, count.map({ $0 == expected }) ?? true, Set(members.map(\.seq)).count == members.count else {
            return .incomplete(found: members, expected: expected)
        }
        return .whole(members)
    }

    /// The first position in `pending` (in seq order) whose seq is at least `seq`.
    private func firstIndex(withSeqAtLeast seq: UInt64) -> Int {
        var low = 0, high = pending.count
        while low < high {
            let middle = (low + high) / 2
            if pending[middle].seq < seq { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The batch a commit record commits: its first seq is the record's 8-byte key.
    package static func firstSeq(ofCommitKey key: UnsafeRawBufferPointer) -> UInt64 {
        key.readLittleEndian(at: 0, as: UInt64.self)
    }
}
