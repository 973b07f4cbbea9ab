import Foundation
import Synchronization
import XCTest
@testable import Cask
import CaskTestSupport

/// No nonce is ever used twice under a key (FORMAT.md, "Why a nonce never repeats"): every message
/// sealed in a long model run — puts, deletes, batches, expiring puts, dictionaries trained and
/// recompressed, compactions, reopens, crashes whose torn tails the next open cuts, a backup restored
/// while the original goes on, repairs, a rekey under the same key — is recorded by its salt and
/// number (``FileCipher/sealObserver``), and no (salt, number) may be sealed with two different messages.
final class EncryptionNonceTests: XCTestCase {
    /// Every (salt, number) sealed, with the fingerprints of the messages sealed under it.
    private final class Ledger: Sendable {
        private let seals = Mutex<[[UInt8]: [UInt64: UInt64]]>([:])
        private let counts = Mutex((seals: 0, repeats: 0, reuses: [String]()))

        func record(_ salt: [UInt8], _ number: UInt64, _ fingerprint: UInt64) {
            let earlier = seals.withLock { seals -> UInt64? in
                if let earlier = seals[salt]?[number] { return earlier }
                seals[salt, default: [:]][number] = fingerprint
                return nil
            }
            counts.withLock { counts in
                counts.seals += 1
                guard let earlier else { return }
                if earlier == fingerprint {
                    counts.repeats += 1  // the same message again (a retried write): harmless
                } else if counts.reuses.count < 20 {
                    counts.reuses.append("salt \(salt.prefix(4).map { String($0, radix: 16) }.joined()) number \(number)")
                }
            }
        }

        var summary: (seals: Int, salts: Int, repeats: Int, reuses: [String]) {
            let salts = seals.withLock { $0.count }
            return counts.withLock { ($0.seals, salts, $0.repeats, $0.reuses) }
        }
    }

    override func tearDown() {
        FileCipher.sealObserver = nil
        super.tearDown()
    }

    func testNoSaltAndNumberIsSealedTwiceWithDifferentMessagesInALongModelRun() throws {
        let ledger = Ledger()
        FileCipher.sealObserver = { ledger.record($0, $1, $2) }
        let parent = TemporaryDirectory("cask-nonces")
        defer { parent.remove() }
        let path = parent.appending("store")
        var options = EncryptionTests.options(maxSegmentSize: 8192)
        options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 16 << 10)
        options.automaticCompaction = true
        options.compactionMinDeadBytes = 1
        var random = SeededGenerator(seed: 0x5EA1)
        var model: [String: [UInt8]] = [:]
        var store = try CaskStore.open(at: path, options: options)
        var backup: (path: String, model: [String: [UInt8]])?
        var crashes = 0, restores = 0, repairs = 0

        func value(_ n: Int) -> [UInt8] {
            switch Int.random(in: 0..<4, using: &random) {
            case 0: random.bytes(Int.random(in: 0...300, using: &random))
            case 1: [UInt8](repeating: UInt8(n % 251), count: Int.random(in: 1...200, using: &random))
            default: DictionaryTests.profile(n)
            }
        }

        for n in 0..<4000 {
            let key = "k/\(Int.random(in: 0..<300, using: &random))"
            switch Int.random(in: 0..<1000, using: &random) {
            case 0..<600:
                let v = value(n)
                try store.put(key, v)
                model[key] = v
            case 600..<700:
                try store.delete(key)
                model[key] = nil
            case 700..<780:
                var batch = WriteBatch()
                for _ in 0..<Int.random(in: 1...6, using: &random) {
                    let k = "k/\(Int.random(in: 0..<300, using: &random))"
                    if Bool.random(using: &random) {
                        let v = value(n)
                        batch.put(k, v)
                        model[k] = v
                    } else {
                        batch.delete(k)
                        model[k] = nil
                    }
                }
                try store.write(batch)
            case 780..<820:
                let v = value(n)
                try store.put(key, v, expiresAfter: .seconds(3600))
                model[key] = v
            case 820..<850:
                _ = try store.compact()
            case 850..<900:
                try store.close()
                store = try CaskStore.open(at: path, options: options)
            case 900..<950:
                // A crash: the files as they are now (everything written), the active segment cut at
                // a random byte; the next open cuts the torn tail and writes on. The copy is made
                // between compactions (a background one writing meanwhile would leave an image no
                // crash can: a segment copied half written beside its hint copied whole).
                let image = parent.appending("image")
                try? FileManager.default.removeItem(atPath: image)
                let activeID = try store.compactionGate.withLock { _ in
                    try copyFiles(of: path, to: image)
                    return store.writer!.withLock { $0.active.id }
                }
                let active = SegmentName.segment(activeID)
                try store.close()
                try FileManager.default.removeItem(atPath: path)
                try FileManager.default.moveItem(atPath: image, toPath: path)
                var bytes = try StoreFiles.read(path + "/" + active)
                while bytes.last == 0 { bytes.removeLast() }  // the reserved space
                // A segment with a hint (the active one of a reopen that wrote nothing yet: the
                // close wrote it after syncing the segment) is whole in any crash.
                let hinted = FileManager.default.fileExists(atPath: path + "/" + SegmentName.hint(activeID))
                if bytes.count > SegmentHeader.encryptedLength && !hinted {
                    bytes.removeLast(Int.random(in: 0...min(60, bytes.count - SegmentHeader.encryptedLength), using: &random))
                    try StoreFiles.write(path + "/" + active, bytes)
                }
                store = try CaskStore.open(at: path, options: options)
                model = try content(of: store)  // what survived: the cut may take the last writes
                crashes += 1
            case 950..<970:
                if let (saved, savedModel) = backup, Bool.random(using: &random) {
                    // Put back an earlier backup while the original had written on under the same salts.
                    try store.close()
                    try FileManager.default.removeItem(atPath: path)
                    try FileManager.default.copyItem(atPath: saved, toPath: path)
                    store = try CaskStore.open(at: path, options: options)
                    XCTAssertEqual(try content(of: store), savedModel)
                    model = savedModel
                    restores += 1
                } else {
                    let destination = parent.appending("backup-\(n)")
                    // Copied: the damage the repairs below make in place must not reach it through a link.
                    try store.backup(to: destination, method: .copy)
                    backup = (destination, model)
                }
            case 970..<985:
                // Damage a sealed segment's record, repair: the segment is written anew under a new salt.
                try store.close()
                let sealed = try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasSuffix(".cask") }.sorted().dropLast()
                if let victim = sealed.randomElement(using: &random) {
                    var bytes = try StoreFiles.read(path + "/" + victim)
                    if bytes.count > SegmentHeader.encryptedLength + 8 {
                        bytes[Int.random(in: (SegmentHeader.encryptedLength + 4)..<bytes.count, using: &random)] ^= 0x20
                        try StoreFiles.write(path + "/" + victim, bytes)
                        _ = try CaskStore.repair(at: path, backupDirectory: parent.appending("repair-\(n)"), encryption: .key(EncryptionTests.key))
                        repairs += 1
                    }
                }
                store = try CaskStore.open(at: path, options: options)
                model = try content(of: store)
            case 985..<990:
                try store.close()
                _ = try CaskStore.rekey(at: path, from: .key(EncryptionTests.key), to: .key(EncryptionTests.key))
                store = try CaskStore.open(at: path, options: options)
            default:
                try store.sync()
            }
        }
        XCTAssertEqual(try content(of: store), model)
        try store.close()
        let summary = ledger.summary
        print("EncryptionNonceTests: \(summary.seals) messages sealed under \(summary.salts) salts, \(summary.repeats) repeated whole; \(crashes) crashes, \(restores) restores, \(repairs) repairs")
        XCTAssertEqual(summary.reuses, [], "a (salt, number) sealed with two different messages")
        XCTAssertGreaterThan(summary.seals, 5000)
        XCTAssertGreaterThan(crashes, 10)
        XCTAssertGreaterThan(restores, 0)
        XCTAssertGreaterThan(repairs, 5)
    }

    /// The files of `path` as they are now, into a new directory `image` (a file that a background
    /// job removes meanwhile is left out, as a crash would).
    private func copyFiles(of path: String, to image: String) throws {
        try FileManager.default.createDirectory(atPath: image, withIntermediateDirectories: false)
        for name in try FileManager.default.contentsOfDirectory(atPath: path) where name != "LOCK" {
            guard let bytes = try? StoreFiles.read(path + "/" + name) else { continue }
            try StoreFiles.write(image + "/" + name, bytes)
        }
    }

    private func content(of store: CaskStore) throws -> [String: [UInt8]] {
        var content: [String: [UInt8]] = [:]
        for key in try store.keys(prefix: "") { content[key] = try store.get(key) }
        return content
    }
}
