import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// In `.os` and `.fsync` modes the writer stores records through the active segment's mapping,
/// into space it reserved ahead in the file (FORMAT.md, "Reserved space"): no `pwrite` per put, a
/// zero-filled tail while the store is open, none once a segment is sealed or the store closed,
/// and a full disk reported when the reservation fails, before anything is written.
final class ReservedSpaceTests: XCTestCase {
    private func options(_ durability: Durability = .os, fileSystem: (any FileSystem)? = nil) -> CaskStore.Options {
        .manualCompaction(durability, maxSegmentSize: 3 << 20, fileSystem: fileSystem)
    }

    /// Where the last record of a segment file ends.
    private func recordsEnd(_ path: String) throws -> Int {
        try StoreFiles.records(ofSegment: path).last.map { $0.offset + $0.length } ?? headerLength(path)
    }

    /// The length of the header of the segment file at `path`.
    private func headerLength(_ path: String) throws -> Int {
        try StoreFiles.read(path).withUnsafeBytes { try SegmentHeader.decode($0, encryption: nil).get().0.byteCount }
    }

    /// Reopened on the real file system, the store at `path` reports nothing and reads `model`.
    private func assertReopensClean(_ path: String, _ model: [[UInt8]: [UInt8]], line: UInt = #line) throws {
        let reopened = try CaskStore.open(at: path, options: options())
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)", line: line)
        assertStore(reopened, matches: model, "reopened", line: line)
        try reopened.close()
    }

    func testWritesGoThroughTheMappingAndTheReservedTailIsGivenBack() throws {
        for durability in [Durability.os, .fsync] {
            let dir = TemporaryDirectory("cask-reserved")
            defer { dir.remove() }
            let fileSystem = FaultInjectingFileSystem(mappedWrites: true)
            let store = try CaskStore.open(at: dir.path, options: options(durability, fileSystem: fileSystem))
            var rng = SeededGenerator(seed: 0x5E5)
            var model: [[UInt8]: [UInt8]] = [:]
            let puts = durability == .os ? 60_000 : 300
            fileSystem.clearTrace()
            for i in 0..<puts {
                let key = Array("user/\(i % 20_000)".utf8), value = rng.bytes(Int.random(in: 40...120, using: &rng))
                try store.put(key, value)
                model[key] = value
            }
            let context = "\(durability)"
            let segmentPaths = try StoreFiles.segmentIDs(in: dir.path).map { StoreFiles.segmentPath(dir.path, $0) }
            if durability == .os { XCTAssertGreaterThanOrEqual(segmentPaths.count, 2, context) }
            // Only segment creations write (their headers); the records went through the mappings.
            let pwrites = fileSystem.trace.filter { $0.operation == .pwrite && $0.path.hasSuffix(".cask") }
            XCTAssertEqual(pwrites.count, segmentPaths.count - 1, "\(context): \(pwrites)")
            XCTAssertTrue(try pwrites.allSatisfy { try $0.offset == 0 && $0.length == headerLength($0.path) }, "\(context): \(pwrites)")
            XCTAssertGreaterThan(fileSystem.count(.allocate), 0, context)

            // Sealed segments end at their last record; the active one has reserved space after it.
            for path in segmentPaths.dropLast() {
                XCTAssertEqual(try StoreFiles.fileSize(path), try recordsEnd(path), "\(context): \(path)")
            }
            let active = segmentPaths.last!
            let activeEnd = try recordsEnd(active)
            XCTAssertGreaterThan(try StoreFiles.fileSize(active), activeEnd, context)
            // Reserved a step at a time, up to a multiple of the step: 2 MiB in `.os` mode, whose
            // segments are held in 2 MiB folios (HugePageTests), 1 MiB in `.fsync` mode.
            let step = Int(durability == .os ? StoreWriter.hugePageReservationStep : StoreWriter.reservationStep)
            XCTAssertLessThanOrEqual(try StoreFiles.fileSize(active), activeEnd + step, context)
            let size = try StoreFiles.fileSize(active)
            XCTAssertTrue(size % step == 0 || size == 3 << 20, "\(context): \(size) bytes, not a multiple of the step nor the mapping's end")

            // What a crash leaves (the page cache keeps what the process stored): a copy opens
            // clean, with every value, and its last segment ends at its last record again.
            let image = TemporaryDirectory("cask-reserved-image")
            defer { image.remove() }
            try StoreFiles.copy(from: dir.path, to: image.path)
            XCTAssertTrue(try CaskStore.verify(at: image.path).isClean, context)
            let readOnly = try CaskStore.open(at: image.path, options: CaskStore.Options(durability: .os, readOnly: true))
            XCTAssertTrue(readOnly.recoveryReport.isClean, "\(context): \(readOnly.recoveryReport)")
            assertStore(readOnly, matches: model, "\(context), read-only copy")
            try readOnly.close()
            let reopened = try CaskStore.open(at: image.path, options: options(durability))
            XCTAssertTrue(reopened.recoveryReport.isClean, "\(context): \(reopened.recoveryReport)")
            assertStore(reopened, matches: model, "\(context), copy")
            let imageActive = image.appending((active as NSString).lastPathComponent)
            XCTAssertEqual(try StoreFiles.fileSize(imageActive), activeEnd, context)
            // The reopened store writes on through a mapping of the segment it recovered.
            try reopened.put("after-reopen", [7])
            model[Array("after-reopen".utf8)] = [7]
            try reopened.close()
            XCTAssertEqual(try StoreFiles.fileSize(imageActive), try recordsEnd(imageActive), context)

            try store.close()
            XCTAssertEqual(try StoreFiles.fileSize(active), activeEnd, "\(context): close gives the reserved space back")
            let again = try CaskStore.open(at: dir.path, options: options(durability))
            XCTAssertTrue(again.recoveryReport.isClean, "\(context): \(again.recoveryReport)")
            model[Array("after-reopen".utf8)] = nil
            assertStore(again, matches: model, "\(context), reopened")
            try again.close()
        }
    }

    /// A full disk fails the reservation: the put that needed it throws `diskFull`, nothing of it
    /// is stored, every earlier value stays, and writes go on once there is space again. A disk
    /// with no room for a whole reservation step but room for the put's pages (the step fails,
    /// the pages do not) fails no put.
    func testAFullDiskFailsTheReservationAndLosesNothing() throws {
        for roomForPages in [false, true] {
            try checkFullDisk(roomForPages: roomForPages)
        }
    }

    private func checkFullDisk(roomForPages: Bool) throws {
        let dir = TemporaryDirectory("cask-reserved-full")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem(mappedWrites: true)
        let store = try CaskStore.open(at: dir.path, options: options(fileSystem: fileSystem))
        // The third reservation's step; then its fallback to the put's own pages.
        fileSystem.fail(.allocate, nth: 3, with: .noSpace)
        if !roomForPages { fileSystem.fail(.allocate, nth: 4, with: .noSpace) }
        var model: [[UInt8]: [UInt8]] = [:]
        var failures = 0
        var rng = SeededGenerator(seed: 0xF011)
        for i in 0..<40_000 {
            let key = Array("draft/\(i)".utf8), value = rng.bytes(90)
            do {
                try store.put(key, value)
                model[key] = value
            } catch {
                failures += 1
                guard case .diskFull(let path) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(path.hasSuffix(".cask"), path)
                XCTAssertNil(try store.get(key))
            }
        }
        XCTAssertEqual(failures, roomForPages ? 0 : 1)
        XCTAssertEqual(model.count, roomForPages ? 40_000 : 39_999)
        assertStore(store, matches: model, "after the full disk")
        try store.close()
        try assertReopensClean(dir.path, model)
    }

    /// A seal whose next segment cannot be created leaves the writer in the segment it was sealing,
    /// still writing through its mapping (which must still be writable), into space reserved again.
    func testAFailedSealKeepsWritingThroughTheMapping() throws {
        let dir = TemporaryDirectory("cask-reserved-seal")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem(mappedWrites: true)
        let store = try CaskStore.open(at: dir.path, options: options(fileSystem: fileSystem))
        var model: [[UInt8]: [UInt8]] = [:]
        for i in 0..<100 {
            let key = Array("session/\(i)".utf8), value = Array("token \(i)".utf8)
            try store.put(key, value)
            model[key] = value
        }
        // A dead record in the active segment: compact() seals it (it leaves a clean one alone).
        try store.put("session/0", Array("token 0 again".utf8))
        model[Array("session/0".utf8)] = Array("token 0 again".utf8)
        fileSystem.fail(.open, pathSuffix: SegmentName.segment(2), with: .noSpace)
        XCTAssertThrowsError(try store.compact()) { error in
            guard case .diskFull = error as? CaskError else { return XCTFail("\(error)") }
        }
        for i in 100..<200 {
            let key = Array("session/\(i)".utf8), value = Array("token \(i)".utf8)
            try store.put(key, value)
            model[key] = value
        }
        XCTAssertEqual(try StoreFiles.segmentIDs(in: dir.path), [1])
        assertStore(store, matches: model, "after the failed seal")
        try store.compact()
        try store.put("after-compaction", [1])
        model[Array("after-compaction".utf8)] = [1]
        assertStore(store, matches: model, "after the compaction")
        try store.close()
        try assertReopensClean(dir.path, model)
    }

    /// A read-only open (or `verify`) beside a writer: the writer may give its reserved space back
    /// (seal, close) while the reader scans the segment — before the reader's first read of its
    /// records, or after it, when the reader reads the end again (where the zeros were, and now the
    /// file ends: once a 1-byte "record cut short" past the end). The reader sees the file end
    /// there, with every record and no damage.
    func testAReaderSeesTheFileEndWhereTheWriterGaveItsSpaceBack() throws {
        for check in ["open", "verify"] { for readsBefore in 1...4 {
            let check = "\(check), paused after \(readsBefore) reads" 
            let dir = TemporaryDirectory("cask-reserved-reader")
            defer { dir.remove() }
            let writer = try CaskStore.open(at: dir.path, options: options())
            var model: [[UInt8]: [UInt8]] = [:]
            for i in 0..<500 {
                let key = Array("search/\(i)".utf8), value = Array("query \(i)".utf8)
                try writer.put(key, value)
                model[key] = value
            }
            let segment = StoreFiles.segmentPath(dir.path, 1)
            XCTAssertGreaterThan(try StoreFiles.fileSize(segment), try recordsEnd(segment))
            // The reader stops in its first read of the segment after the header's.
            let readerFileSystem = FaultInjectingFileSystem()
            let gate = FaultInjectingFileSystem.Gate()
            readerFileSystem.inject(.init(.pread, pathSuffix: SegmentName.segment(1), .after(readsBefore), .pause(gate)))
            var readOnly = CaskStore.Options(durability: .os, readOnly: true)
            readOnly.fileSystem = readerFileSystem
            let outcome = Lock<Result<(Bool, [[UInt8]: [UInt8]]), CaskError>?>(nil)
            let done = DispatchGroup()
            let directory = dir.path, readerOptions = readOnly
            DispatchQueue.global().async(group: done) {
                let result = Result { () throws(CaskError) -> (Bool, [[UInt8]: [UInt8]]) in
                    if check.hasPrefix("verify") {
                        let report = try StoreVerifier(directory: directory, fileSystem: readerFileSystem).run(progress: nil)
                        return (report.isClean, [:])
                    }
                    let store = try CaskStore.open(at: directory, options: readerOptions)
                    defer { try? store.close() }
                    var contents: [[UInt8]: [UInt8]] = [:]
                    for key in try store.keys() { contents[key] = try store.get(key) }
                    return (store.recoveryReport.isClean, contents)
                }
                outcome.withLock { $0 = result }
            }
            gate.waitUntilReached()
            try writer.close()  // gives the reserved space back under the reader
            XCTAssertEqual(try StoreFiles.fileSize(segment), try recordsEnd(segment), check)
            gate.open()
            done.wait()
            let (clean, contents) = try XCTUnwrap(outcome.withLock { $0 }, check).get()
            XCTAssertTrue(clean, check)
            if check.hasPrefix("open") { XCTAssertEqual(contents, model, check) }
        } }
    }

    /// Where the file system cannot reserve space (`fallocate` unsupported), the store writes with
    /// `pwrite` instead.
    func testWithoutReservationsWritesUsePwrite() throws {
        let dir = TemporaryDirectory("cask-reserved-unsupported")
        defer { dir.remove() }
        let fileSystem = FaultInjectingFileSystem(mappedWrites: true)
        fileSystem.failAlways(.allocate, with: .notSupported)
        let store = try CaskStore.open(at: dir.path, options: options(fileSystem: fileSystem))
        var model: [[UInt8]: [UInt8]] = [:]
        for i in 0..<2_000 {
            let key = Array("search/\(i)".utf8), value = Array("query \(i)".utf8)
            try store.put(key, value)
            model[key] = value
        }
        XCTAssertGreaterThanOrEqual(fileSystem.count(.pwrite), 2_000)
        XCTAssertEqual(fileSystem.count(.allocate), 1, "one refusal turns reservations off for the segment")
        assertStore(store, matches: model, "pwrite")
        try store.close()
        try assertReopensClean(dir.path, model)
    }
}
