import Foundation
import XCTest
@testable import Cask
import CaskTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A store directory as a hostile user leaves it: symbolic links, hard links, FIFOs and devices
/// where Cask expects its own files, and outputs that are not regular files. Each test runs the
/// library or the built `cask` binary in a scratch sandbox and checks, by hashing everything in the
/// sandbox outside the store before and after, that nothing outside the store changed — and that
/// the message names the path and the cause. Victims are files of the sandbox, never the system's.
final class HostileFileSystemTests: XCTestCase {
    // MARK: The sandbox

    /// A scratch directory holding a store `s` with keys `k1`…`k3` and a victim file outside it.
    private struct Sandbox {
        let root: TemporaryDirectory
        var store: String { root.appending("s") }
        var victim: String { root.appending("victim") }

        init() throws {
            root = TemporaryDirectory("cask-hostile")
            let store = try CaskStore.open(at: root.appending("s"))
            for key in ["k1", "k2", "k3"] { try store.put(key, Array("value of \(key)".utf8)) }
            try store.close()
            try Data("keep\n".utf8).write(to: URL(fileURLWithPath: root.appending("victim")))
        }

        func inStore(_ name: String) -> String { store + "/" + name }

        /// Every file under the sandbox but the store: its path, type and content (or link target).
        func outside() throws -> [String: String] {
            var seen: [String: String] = [:]
            let manager = FileManager.default
            for name in try manager.subpathsOfDirectory(atPath: root.path) where name != "s" && !name.hasPrefix("s/") {
                let path = root.appending(name)
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFLNK: seen[name] = "link to " + ((try? manager.destinationOfSymbolicLink(atPath: path)) ?? "?")
                case S_IFREG: seen[name] = "file \(info.st_mode & 0o7777) " + ((try? Data(contentsOf: URL(fileURLWithPath: path)))?.base64EncodedString() ?? "?")
                case S_IFDIR: seen[name] = "directory"
                case S_IFIFO: seen[name] = "fifo"
                default: seen[name] = "other \(info.st_mode)"
                }
            }
            return seen
        }
    }

    private func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> ToolTests.Run {
        try ToolTests.cask(arguments, stdin: stdin, file: file, line: line)
    }

    private func symlink(_ target: String, at path: String) throws {
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
    }

    /// The writing commands, each as it runs against the store `dir` (inputs written beside it).
    private func writingCommands(_ box: Sandbox) throws -> [(String, [String], Data)] {
        let jsonl = box.root.appending("in.jsonl")
        try Data("{\"key\":\"j\",\"value\":\"v\"}\n".utf8).write(to: URL(fileURLWithPath: jsonl))
        let plist = box.root.appending("in.plist")
        try Data("""
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>p</key><string>v</string></dict></plist>

            """.utf8).write(to: URL(fileURLWithPath: plist))
        return [
            ("put", ["put", box.store, "k4"], Data("v".utf8)),
            ("delete", ["delete", box.store, "k1"], Data()),
            ("compact", ["compact", box.store], Data()),
            ("recover", ["recover", box.store], Data()),
            ("import", ["import", box.store, "--input", jsonl], Data()),
            ("import-defaults", ["import-defaults", box.store, plist], Data()),
        ]
    }

    // MARK: The lock file

    /// Issue 27, finding 1: a `LOCK` symlink was followed, and its target emptied, by every writing
    /// command; a dangling one created its target.
    func testLinkedLockFileIsRefusedByEveryWritingCommand() throws {
        for dangling in [false, true] {
            let box = try Sandbox()
            try FileManager.default.removeItem(atPath: box.inStore("LOCK"))
            let target = dangling ? box.root.appending("created-by-cask") : box.victim
            try symlink(target, at: box.inStore("LOCK"))
            let commands = try writingCommands(box)
            let before = try box.outside()
            for (name, arguments, stdin) in commands {
                let run = try cask(arguments, stdin: stdin)
                XCTAssertEqual(run.status, 1, "\(name): \(run.err)")
                let expected = CaskError.foreignFile(path: box.inStore("LOCK"), errno: .symbolicLink).description
                XCTAssertTrue(run.err.contains("Error: \(expected)\n"), "\(name): \(run.err)")
                XCTAssertEqual(try box.outside(), before, "\(name) changed a file outside the store")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: box.root.appending("created-by-cask")))
        }
    }

    func testLockFileThatIsHardLinkedFifoOrDirectoryIsRefused() throws {
        let box = try Sandbox()
        let lock = box.inStore("LOCK")
        // A hard link to a file outside the store: writing the pid would change it.
        try FileManager.default.removeItem(atPath: lock)
        XCTAssertEqual(link(box.victim, lock), 0)
        let before = try box.outside()
        XCTAssertThrowsError(try CaskStore.open(at: box.store)) { error in
            XCTAssertEqual(error as? CaskError, .foreignFile(path: lock, errno: .hardLinked))
            XCTAssertEqual("\(error)", "\(lock) is a file with other hard links; Cask opens only regular files of its own in a store and never follows links, so it did not open it: move it out of the store directory, and check who else can write there")
        }
        XCTAssertEqual(try box.outside(), before)
        // A FIFO: the open must neither block (no writer) nor accept it.
        try FileManager.default.removeItem(atPath: lock)
        XCTAssertEqual(mkfifo(lock, 0o600), 0)
        XCTAssertThrowsError(try CaskStore.open(at: box.store)) { error in
            XCTAssertEqual(error as? CaskError, .foreignFile(path: lock, errno: .notRegularFile))
        }
        try FileManager.default.removeItem(atPath: lock)
        try FileManager.default.createDirectory(atPath: lock, withIntermediateDirectories: false)
        XCTAssertThrowsError(try CaskStore.open(at: box.store)) { error in
            XCTAssertEqual(error as? CaskError, .foreignFile(path: lock, errno: .notRegularFile))
        }
        // Once it is a plain file again, the store opens with its data.
        try FileManager.default.removeItem(atPath: lock)
        let store = try CaskStore.open(at: box.store)
        XCTAssertEqual(try store.get("k2"), Array("value of k2".utf8))
        try store.close()
        XCTAssertEqual(try box.outside(), before)
    }

    // MARK: Segments, hints and manifests

    /// A segment replaced by a link to a copy of itself outside the store: the open fails naming
    /// it (it does not skip the segment, whose keys would silently vanish), and nothing is written
    /// through the link, read-only or not.
    func testLinkedSegmentFailsTheOpen() throws {
        let box = try Sandbox()
        let segment = box.inStore(SegmentName.segment(1))
        let outside = box.root.appending("segment-copy")
        try FileManager.default.moveItem(atPath: segment, toPath: outside)
        try symlink(outside, at: segment)
        let before = try box.outside()
        for readOnly in [false, true] {
            var options = CaskStore.Options()
            options.readOnly = readOnly
            XCTAssertThrowsError(try CaskStore.open(at: box.store, options: options)) { error in
                XCTAssertEqual(error as? CaskError, .foreignFile(path: segment, errno: .symbolicLink), "read-only: \(readOnly)")
            }
        }
        let run = try cask(["put", box.store, "k9"], stdin: Data("v".utf8))
        XCTAssertEqual(run.status, 1, run.err)
        XCTAssertEqual(run.err, "Error: \(CaskError.foreignFile(path: segment, errno: .symbolicLink))\n")
        XCTAssertEqual(try box.outside(), before)
    }

    /// A hint file linked elsewhere is not read (the open rebuilds the index from the segment),
    /// and nothing is written through the link, compaction included.
    func testLinkedHintIsNeitherReadNorFollowed() throws {
        let box = try Sandbox()
        // Seal segment 1 so that it has a hint: a store with a small segment size rotates.
        var options = CaskStore.Options()
        options.maxSegmentSize = 4096
        var store = try CaskStore.open(at: box.store, options: options)
        for index in 0..<200 { try store.put("key\(index)", Array(repeating: UInt8(index & 0xFF), count: 64)) }
        try store.close()
        let hints = try FileManager.default.contentsOfDirectory(atPath: box.store).filter { $0.hasSuffix(SegmentName.hintExtension) }.sorted()
        let hint = try XCTUnwrap(hints.first, "no hint file was written")
        let copy = box.root.appending("hint-copy")
        try FileManager.default.moveItem(atPath: box.inStore(hint), toPath: copy)
        try symlink(copy, at: box.inStore(hint))
        let before = try box.outside()
        store = try CaskStore.open(at: box.store, options: options)
        for index in 0..<200 { XCTAssertEqual(try store.get("key\(index)"), Array(repeating: UInt8(index & 0xFF), count: 64)) }
        _ = try store.compact()
        try store.close()
        XCTAssertEqual(try box.outside(), before)
    }
}
