import XCTest
@testable import Cask
import CaskTestSupport

/// ``BatchAssembler`` against a model of the batch rules (FORMAT.md, "Batches"): a commit of seq `c`
/// naming first seq `f` takes the held members of seqs `f ..< c`, whole only when each is there
/// once — whatever order the members came in, and however many orphans are held.
final class BatchAssemblerTests: XCTestCase {
    private func member(_ seq: UInt64) -> BatchAssembler.Member {
        .init(key: [UInt8(truncatingIfNeeded: seq)], type: .put, seq: seq, valueLength: 0, expiresAt: nil,
              location: RecordLocation(segmentID: 1, offset: UInt32(40 + seq), length: 1))
    }

    /// A commit whose key names a first seq past its own seq, while members of higher seqs are held
    /// (what the store-image fuzzer built: members after a commit record of a lower seq), commits
    /// nothing and keeps what it holds; the search's bounds came out reversed and trapped.
    func testACommitKeyPastItsOwnSeqCommitsNothing() {
        var assembler = BatchAssembler()
        for seq: UInt64 in [5, 6, 7] { assembler.hold(member(seq)) }
        switch assembler.commit(firstSeq: 7, commitSeq: 4) {
        case .whole: XCTFail("a commit of nothing is never whole")
        case .incomplete(let found, let expected):
            XCTAssertEqual(found.map(\.seq), [])
            XCTAssertEqual(expected, 0)
        }
        XCTAssertEqual(assembler.pending.map(\.seq), [5, 6, 7])
        guard case .whole(let members) = assembler.commit(firstSeq: 5, commitSeq: 8) else { return XCTFail("5 ..< 8 is held whole") }
        XCTAssertEqual(members.map(\.seq), [5, 6, 7])
    }

    func testCommitsAgreeWithTheModelInAndOutOfSeqOrder() {
        var random = SeededGenerator(seed: 22)
        for round in 0..<300 {
            var assembler = BatchAssembler()
            var model: [BatchAssembler.Member] = []
            var nextSeq: UInt64 = 1
            for _ in 0..<40 {
                if Int.random(in: 0..<3, using: &random) > 0 {
                    // Members, mostly in increasing order; now and then one out of order or repeated.
                    let seq: UInt64 = round % 3 == 0 && Bool.random(using: &random) ? UInt64.random(in: 1...nextSeq, using: &random) : nextSeq
                    nextSeq = max(nextSeq, seq + 1)
                    assembler.hold(member(seq))
                    model.append(member(seq))
                } else {
                    // A commit, usually of the members just held, sometimes of a range that misses some.
                    let commitSeq = nextSeq
                    // Now and then a first seq past the commit's own, as a damaged or crafted
                    // commit key may say (it commits nothing; a reversed range once trapped).
                    let firstSeq = switch Int.random(in: 0..<10, using: &random) {
                    case 0: UInt64.random(in: (commitSeq + 1)...(commitSeq + 50), using: &random)
                    case 1: UInt64.max
                    default: UInt64.random(in: 1...commitSeq, using: &random)
                    }
                    nextSeq += 1
                    let taken = model.filter { $0.seq >= firstSeq && $0.seq < commitSeq }
                    model.removeAll { $0.seq >= firstSeq && $0.seq < commitSeq }
                    let expected = firstSeq < commitSeq ? commitSeq - firstSeq : 0
                    let whole = expected > 0 && UInt64(taken.count) == expected && Set(taken.map(\.seq)).count == taken.count
                    switch assembler.commit(firstSeq: firstSeq, commitSeq: commitSeq) {
                    case .whole(let members):
                        XCTAssertTrue(whole, "round \(round): whole, the model says not")
                        XCTAssertEqual(members.map(\.seq), taken.map(\.seq), "round \(round)")
                    case .incomplete(let found, let count):
                        XCTAssertFalse(whole && expected > 0, "round \(round): incomplete, the model says whole")
                        XCTAssertEqual(found.map(\.seq), taken.map(\.seq), "round \(round)")
                        XCTAssertEqual(count, expected)
                    }
                }
                XCTAssertEqual(assembler.pending.map(\.seq), model.map(\.seq), "round \(round): held members")
            }
        }
    }

    /// The repair judges a batch as the open does: a member whose value does not expand still counts
    /// (the open indexes it), so dropping it never makes whole a batch with one member too many; and
    /// a whole batch that loses such a member cannot stay whole once rewritten, so it goes whole.
    func testTheRepairCountsAMemberItDropsForItsValue() {
        func items(members seqs: [UInt64], unreadable: UInt64?, count: UInt64) -> [StoreRepair.Item] {
            var items = seqs.enumerated().map { position, seq in
                StoreRepair.Item(
                    offset: 40 + Int64(position) * 20, length: 20, type: .put, flags: RecordFlags.batchMember, seq: seq, batchFirstSeq: 0,
                    batchCount: nil, dropReason: seq == unreadable ? "LZ4 payload does not expand" : nil)
            }
            items.append(StoreRepair.Item(
                offset: 40 + Int64(seqs.count) * 20, length: 20, type: .batch, flags: 0, seq: count + 1, batchFirstSeq: 1, batchCount: count))
            return items
        }
        // Seven members and a copy of the fourth (eight for a count of seven): none applied, as the
        // open finds; before, dropping the unreadable copy made the batch whole.
        var extra = items(members: [1, 2, 3, 4, 4, 5, 6, 7], unreadable: 4, count: 7)
        extra[4].dropReason = nil
        extra[3].dropReason = "LZ4 payload does not expand"
        StoreRepair.dropUnappliedBatches(&extra, tornTail: nil)
        XCTAssertTrue(extra.allSatisfy { $0.dropReason != nil }, "\(extra.map(\.dropReason))")
        // Whole, with an unreadable member: it goes whole.
        var unreadable = items(members: Array(1...7), unreadable: 3, count: 7)
        StoreRepair.dropUnappliedBatches(&unreadable, tornTail: nil)
        XCTAssertTrue(unreadable.allSatisfy { $0.dropReason != nil }, "\(unreadable.map(\.dropReason))")
        // Whole and readable: kept.
        var whole = items(members: Array(1...7), unreadable: nil, count: 7)
        StoreRepair.dropUnappliedBatches(&whole, tornTail: nil)
        XCTAssertTrue(whole.allSatisfy { $0.dropReason == nil }, "\(whole.map(\.dropReason))")
    }
}
