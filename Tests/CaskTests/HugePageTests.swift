import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Segment mappings and 2 MiB pages: every mapping of 2 MiB or more starts on a 2 MiB boundary; in
/// `.os` mode the active segment's mapping asks for 2 MiB page-cache folios and the writer reserves
/// space up to 2 MiB boundaries, so that reads map the segment with one TLB entry per 2 MiB; in
/// `.fsync` mode it does not (a 2 MiB folio is written back whole at every sync); and a segment
/// synced after new writes more than ``StoreWriter/hugePageSyncLimit`` times is sealed, the next
/// one in 4 KiB pages.
final class HugePageTests: XCTestCase {
    private static let twoMiB = 2 << 20

    private func options(_ durability: Durability, segment: Int64 = 8 << 20) -> CaskStore.Options {
        var options = CaskStore.Options.manualCompaction(durability, maxSegmentSize: segment)
        options.keyPrefixes = false  // a first segment sealed early for a key prefix would be another 4 MiB
        return options
    }

    /// A file under `/proc`, read to its end (its size reads as 0, so Foundation stops after a page).
    private func readProcFile(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw CaskError.io(operation: "open", path: path, errno: .current) }
        defer { close(fd) }
        var bytes: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// KiB of the process's mappings of `path` that the kernel maps with 2 MiB entries (`FilePmdMapped`
    /// in `/proc/self/smaps`), or nil when no mapping of it is listed.
    private func hugeMappedKiB(of path: String) throws -> Int? {
        let smaps = try readProcFile("/proc/self/smaps")
        var inFile = false, found = false, total = 0
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {
                inFile = fields.count >= 6 && fields[5...].joined(separator: " ") == path
                found = found || inFile
            } else if inFile, fields.count >= 2, fields[0] == "FilePmdMapped:" {
                total += Int(fields[1]) ?? 0
            }
        }
        return found ? total : nil
    }

    /// Whether this kernel and file system hold a file written through a mapping advised
    /// `MADV_HUGEPAGE` in 2 MiB folios mapped with 2 MiB entries (ext4 since Linux 6.x does; where
    /// not, the advice is a no-op, and the tests of it skip).
    private func platformMapsFileHugePages(in directory: String) throws -> Bool {
        let path = directory + "/probe"
        let fileSystem = PosixFileSystem()
        let fd = try fileSystem.open(path, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o600)
        defer { fileSystem.close(fd); try? fileSystem.unlink(path) }
        guard (try? fileSystem.allocate(fd, offset: 0, length: Int64(4 << 20))) != nil else { return false }
        let mapping = try fileSystem.map(fd, length: 4 << 20, writable: true, hugePages: true)
        defer { fileSystem.unmap(mapping, length: 4 << 20) }
        mapping.initializeMemory(as: UInt8.self, repeating: 7, count: 4 << 20)
        return (try hugeMappedKiB(of: path) ?? 0) >= 2048
    }

    private func activeSegment(_ store: CaskStore) -> (id: UInt64, path: String, hugePages: Bool) {
        store.writer!.withLock { w in (w.active.id, w.active.path, w.active.hasHugePages) }
    }

    func testMappingsOf2MiBOrMoreStartOnA2MiBBoundaryAndLeaveNothingBehind() throws {
        let dir = TemporaryDirectory("cask-map-aligned")
        defer { dir.remove() }
        let fileSystem = PosixFileSystem()
        var rng = SeededGenerator(seed: 0xA11)
        for length in [100, 4096, Self.twoMiB - 1, Self.twoMiB, 5 * Self.twoMiB / 2 + 123] {
            let path = dir.appending("file-\(length)")
            let bytes = rng.bytes(length)
            try StoreFiles.write(path, bytes)
            let fd = try fileSystem.open(path, flags: O_RDWR, mode: 0)
            defer { fileSystem.close(fd) }
            for writable in [false, true] {
                let mapping = try fileSystem.map(fd, length: length, writable: writable, hugePages: writable)
                if length >= Self.twoMiB {
                    XCTAssertEqual(Int(bitPattern: mapping) % Self.twoMiB, 0, "\(length) bytes, writable \(writable)")
                }
                XCTAssertTrue(bytes.withUnsafeBytes { memcmp($0.baseAddress!, mapping, length) == 0 }, "\(length) bytes")
                if writable {
                    mapping.storeBytes(of: 0xAB, toByteOffset: length - 1, as: UInt8.self)
                    var last: UInt8 = 0
                    XCTAssertEqual(pread(fd, &last, 1, off_t(length - 1)), 1)
                    XCTAssertEqual(last, 0xAB, "a store through the mapping is the file's")
                }
                fileSystem.unmap(mapping, length: length)
            }
        }

        // The address space reserved to find the boundary is given back: mapping and unmapping
        // 4 MiB a hundred times leaves the process no bigger (a leak would be 2 MiB or more each).
        func virtualKiB() throws -> Int {
            let status = try readProcFile("/proc/self/status")
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmSize:") }!
            return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1])!
        }
        let path = dir.appending("big")
        try StoreFiles.write(path, rng.bytes(4 << 20))
        let fd = try fileSystem.open(path, flags: O_RDONLY, mode: 0)
        defer { fileSystem.close(fd) }
        let before = try virtualKiB()
        for _ in 0..<100 { fileSystem.unmap(try fileSystem.map(fd, length: 4 << 20), length: 4 << 20) }
        XCTAssertLessThan(try virtualKiB() - before, 64 << 10, "VmSize grew")
    }

    /// The reservation steps, and what they are for: `.os` segments in 2 MiB folios mapped with
    /// 2 MiB entries, while written and once reopened; `.fsync` segments never in them.
    func testOSModeSegmentsAreHeldIn2MiBPagesAndFsyncModeSegmentsAreNot() throws {
        let dir = TemporaryDirectory("cask-huge-pages")
        defer { dir.remove() }
        guard PosixFileSystem().supportsMappedWrites(in: dir.path) else {
            throw XCTSkip("the temporary directory's file system takes no writes through a mapping (not ext4, XFS or tmpfs)")
        }
        let platform = try platformMapsFileHugePages(in: dir.path)
        var rng = SeededGenerator(seed: 0x2B16)
        for durability in [Durability.os, .fsync] {
            let path = dir.appending("\(durability)")
            var model: [[UInt8]: [UInt8]] = [:]
            var activePath = ""
            // In a scope of its own: the closed store's mappings last until it is freed, and the
            // reopened store's must be the only ones of its files counted below.
            do {
                let store = try CaskStore.open(at: path, options: options(durability))
                // About 5 MiB of incompressible values, in batches (one sync each in `.fsync` mode).
                for group in 0..<100 {
                    var batch = WriteBatch()
                    for i in 0..<50 {
                        let key = Array("draft/\(group)/\(i)".utf8), value = rng.bytes(1000)
                        batch.put(key, value)
                        model[key] = value
                    }
                    try store.write(batch)
                }
                let active = activeSegment(store)
                let end = try StoreFiles.records(ofSegment: active.path).last.map { $0.offset + $0.length }!
                XCTAssertGreaterThan(end, 2 * Self.twoMiB, "\(durability)")
                let step = durability == .os ? Self.twoMiB : Self.twoMiB / 2
                XCTAssertEqual(try StoreFiles.fileSize(active.path), (end + step - 1) / step * step, "\(durability): reserved to the step")
                XCTAssertEqual(active.hugePages, durability == .os, "\(durability)")
                if platform {
                    let huge = try XCTUnwrap(hugeMappedKiB(of: active.path), "\(durability): the active segment is mapped")
                    if durability == .os {
                        // The first 2 MiB hold the header, written with `pwrite` before the mapping
                        // existed, so they are in 4 KiB pages; the next 2 MiB are one folio.
                        XCTAssertGreaterThanOrEqual(huge, 2048, "2 MiB of the active segment in one folio")
                    } else {
                        XCTAssertEqual(huge, 0, "a durable store's pages are 4 KiB: each sync writes back only what it must")
                    }
                }
                try store.close()
                activePath = active.path
            }

            // Reopened (the file cut at its last record, which splits only the folio there), the
            // segment is 2 MiB-mapped again where its folios are whole.
            let reopened = try CaskStore.open(at: path, options: options(durability))
            for (key, value) in model where try reopened.get(key) != value { XCTFail("\(durability): a value reads wrong") }
            if platform {
                let huge = try XCTUnwrap(hugeMappedKiB(of: activePath), "\(durability): reopened")
                XCTAssertEqual(huge >= 2048, durability == .os, "\(durability), reopened: \(huge) KiB 2 MiB-mapped")
            }
            try reopened.close()
        }
        if !platform { throw XCTSkip("this kernel or file system keeps file pages in 4 KiB: only the reservation steps were checked") }
    }

    /// A store in `.os` mode that syncs more than `hugePageSyncLimit` times in a segment goes on in
    /// 4 KiB pages from the next sync on (each sync of a 2 MiB folio may write back all of it), and
    /// gets 2 MiB pages back in the segment after one that saw no more syncs than the limit.
    func testASegmentSyncedOftenIsSealedAndTheNextHas4KiBPages() throws {
        let dir = TemporaryDirectory("cask-huge-sync")
        defer { dir.remove() }
        let store = try CaskStore.open(at: dir.path, options: options(.os, segment: 4 << 20))
        var model: [[UInt8]: [UInt8]] = [:]
        var rng = SeededGenerator(seed: 0x5C)
        func put(_ key: String, size: Int = 100) throws {
            let value = rng.bytes(size)
            try store.put(key, value)
            model[Array(key.utf8)] = value
        }
        let first = activeSegment(store)
        XCTAssertTrue(first.hugePages)
        for i in 0..<StoreWriter.hugePageSyncLimit {
            try put("session/\(i)")
            try store.sync()
        }
        XCTAssertEqual(activeSegment(store).id, first.id, "up to the limit, the segment goes on")
        // Syncs that find nothing new to write back cost nothing, and do not count.
        for _ in 0..<10 { try store.sync() }
        XCTAssertEqual(activeSegment(store).id, first.id, "idle syncs do not count")
        try put("session/last")
        try store.sync()
        let second = activeSegment(store)
        XCTAssertEqual(second.id, first.id + 1, "one sync more seals it")
        XCTAssertFalse(second.hugePages)
        XCTAssertEqual(try StoreFiles.fileSize(first.path), try StoreFiles.records(ofSegment: first.path).last.map { $0.offset + $0.length }!)

        // Filled without syncs, the 4 KiB segment is sealed; the next has 2 MiB pages again.
        var i = 0
        while activeSegment(store).id == second.id {
            try put("draft/\(i)", size: 2000)
            i += 1
        }
        let third = activeSegment(store)
        XCTAssertEqual(third.id, second.id + 1)
        XCTAssertTrue(third.hugePages)
        for (key, value) in model where try store.get(key) != value { XCTFail("a value reads wrong") }
        try store.close()

        let reopened = try CaskStore.open(at: dir.path, options: options(.os, segment: 4 << 20))
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.count, model.count)
        for (key, value) in model where try reopened.get(key) != value { XCTFail("reopened: a value reads wrong") }
        try reopened.close()
    }
}
