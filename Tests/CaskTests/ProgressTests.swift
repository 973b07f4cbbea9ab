import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Every long call reports ``CaskStore/Progress`` alike: each phase starts at 0, `done` never goes
/// back, ends at `total`, and a phase reports at most about once per 1% of its bytes.
final class ProgressTests: XCTestCase {
    func testVerifyCompactAndRepairReportProgressAlike() throws {
        let dir = TemporaryDirectory("cask-progress")
        defer { dir.remove() }
        var options = CaskStore.Options(durability: .os)
        options.maxSegmentSize = 1 << 20
        options.automaticCompaction = false
        var random = SeededGenerator(seed: 7)
        let store = try CaskStore.open(at: dir.path, options: options)
        for round in 0..<2 {
            for key in 0..<1_500 { try store.put("k\(key)", random.bytes(2_000 + round)) }  // about 6 MB, incompressible
        }
        var compacting: [CaskStore.Progress] = []
        let result = try store.compact { compacting.append($0) }
        XCTAssertGreaterThan(result.bytesBefore, 2 << 20)
        check(compacting, phases: [.compacting], totals: [result.bytesBefore])
        try store.close()

        var verifying: [CaskStore.Progress] = []
        let verification = try CaskStore.verify(at: dir.path) { verifying.append($0) }
        XCTAssertTrue(verification.isClean, "\(verification)")
        check(verifying, phases: [.verifying], totals: [verification.bytesChecked])

        try StoreFiles.flip(StoreFiles.segmentPath(dir.path, try StoreFiles.segmentIDs(in: dir.path)[0]), at: 500)
        var repairing: [CaskStore.Progress] = []
        let repair = try CaskStore.repair(at: dir.path, backupDirectory: dir.path + "-backup") { repairing.append($0) }
        defer { try? FileManager.default.removeItem(atPath: dir.path + "-backup") }
        XCTAssertFalse(repair.isClean)
        check(repairing, phases: [.checking, .backingUp, .repairing], totals: [repair.bytesChecked, nil, nil])
    }

    /// `reports` fall into `phases`, in order, each from 0 to its total (`totals`, where known), never back.
    private func check(
        _ reports: [CaskStore.Progress], phases: [CaskStore.Progress.Phase], totals: [Int64?],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(reports.map(\.phase).reduce(into: [CaskStore.Progress.Phase]()) { if $0.last != $1 { $0.append($1) } }, phases, file: file, line: line)
        for (phase, total) in zip(phases, totals) {
            let reported = reports.filter { $0.phase == phase }
            guard let first = reported.first, let last = reported.last else { continue }
            XCTAssertEqual(first.done, 0, "\(phase) starts at 0", file: file, line: line)
            XCTAssertEqual(last.done, last.total, "\(phase) ends at its total", file: file, line: line)
            if let total { XCTAssertEqual(last.total, total, "\(phase)", file: file, line: line) }
            XCTAssertTrue(zip(reported, reported.dropFirst()).allSatisfy { $0.done < $1.done && $0.total == $1.total }, "\(phase): \(reported.map(\.done))", file: file, line: line)
            XCTAssertLessThanOrEqual(reported.count, 102 + 20, "\(phase): about one report per 1%, plus one per segment", file: file, line: line)
        }
    }
}
