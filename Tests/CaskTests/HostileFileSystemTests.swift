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

    /// The store path itself a link to nothing, or a loop of links: "Permission denied" before;
    /// now the cause, and the link's target is not created.
    func testStorePathThatIsADanglingLinkOrALoop() throws {
        let box = try Sandbox()
        let dangling = box.root.appending("dangling-store"), loop = box.root.appending("loop-a")
        try symlink(box.root.appending("no-such-dir"), at: dangling)
        try symlink(box.root.appending("loop-b"), at: loop)
        try symlink(loop, at: box.root.appending("loop-b"))
        for (path, cause) in [(dangling, "No such file or directory (errno 2)"), (loop, "Too many levels of symbolic links (errno 40)")] {
            let run = try cask(["put", path, "k"], stdin: Data("v".utf8))
            XCTAssertEqual(run.status, 1, run.err)
            XCTAssertEqual(run.err, "Error: open store directory failed on \(path): \(cause)\n")
        }
        // Commands that only read: a loop is named as one (it was "does not exist").
        let read = try cask(["get", loop, "k"])
        XCTAssertEqual(read.status, 1, read.err)
        XCTAssertEqual(read.err, "Error: open store directory failed on \(loop): Too many levels of symbolic links (errno 40)\n")
        let missing = try cask(["get", dangling, "k"])
        XCTAssertEqual(missing.status, 1, missing.err)
        XCTAssertTrue(missing.err.hasPrefix("Error: store directory \(dangling) does not exist"), missing.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: box.root.appending("no-such-dir")))
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

    /// A `COMPACTION` manifest that is a link — to a valid manifest outside the store that retires
    /// segment 1 — is never followed: no segment is deleted on its word, every command (read-only
    /// ones too) fails naming it, and nothing outside changes.
    func testLinkedCompactionManifestIsNotFollowed() throws {
        let box = try Sandbox()
        let outsideManifest = box.root.appending("manifest-copy")
        try Data(CompactionManifest.encode(inputs: [1])).write(to: URL(fileURLWithPath: outsideManifest))
        let manifest = box.inStore(CompactionManifest.fileName)
        try symlink(outsideManifest, at: manifest)
        let before = try box.outside()
        for readOnly in [false, true] {
            var options = CaskStore.Options()
            options.readOnly = readOnly
            XCTAssertThrowsError(try CaskStore.open(at: box.store, options: options)) { error in
                XCTAssertEqual(error as? CaskError, .foreignFile(path: manifest, errno: .symbolicLink), "read-only: \(readOnly)")
            }
        }
        for arguments in [["get", box.store, "k1"], ["verify", box.store], ["compact", box.store]] {
            let run = try cask(arguments)
            XCTAssertEqual(run.status, 1, "\(arguments): \(run.err)")
            XCTAssertEqual(run.err, "Error: \(CaskError.foreignFile(path: manifest, errno: .symbolicLink))\n", "\(arguments)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: box.inStore(SegmentName.segment(1))), "segment 1 is kept")
        XCTAssertEqual(try box.outside(), before)
        // Once the link is gone, the store is as it was.
        try FileManager.default.removeItem(atPath: manifest)
        let store = try CaskStore.open(at: box.store)
        XCTAssertEqual(try store.get("k1"), Array("value of k1".utf8))
        try store.close()
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

    // MARK: Files that are not the store's

    /// A file that only has a segment's name — not a Cask segment, with no hint file — in a directory
    /// that holds nothing else of a store: the open takes the directory for a store whose newest
    /// segment has a damaged header, so no segment is active. Neither the library nor a writing
    /// command cuts or appends to it (its bytes after offset 40 would otherwise have been the
    /// active segment's torn tail, cut away); writes go to a new segment.
    func testAFileWithASegmentsNameIsNeverCutNorAppendedTo() throws {
        let box = try Sandbox()
        try FileManager.default.removeItem(atPath: box.store)
        try FileManager.default.createDirectory(atPath: box.store, withIntermediateDirectories: false)
        let foreign = Data((0..<40).map { "line \($0) of somebody's notes\n" }.joined().utf8)
        let path = box.inStore("0000000001.cask")
        try foreign.write(to: URL(fileURLWithPath: path))

        let store = try CaskStore.open(at: box.store)
        XCTAssertEqual(store.recoveryReport.truncations, [])
        XCTAssertEqual(store.recoveryReport.damagedRanges.first?.kind, .segmentHeader, "\(store.recoveryReport)")
        try store.put("k", [1])
        try store.close()
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), foreign, "the library's open and put")

        let run = try cask(["put", box.store, "k2"], stdin: Data("v".utf8))
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), foreign, "cask put")
        let reopened = try CaskStore.open(at: box.store)
        XCTAssertEqual(try reopened.get("k"), [1])
        XCTAssertEqual(try reopened.get("k2"), Array("v".utf8))
        try reopened.close()
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), foreign)
        XCTAssertTrue(FileManager.default.fileExists(atPath: box.inStore("0000000002.cask")))
    }

    /// Found by trying the tool on a directory of one's own: every writing command deleted any
    /// `*.tmp` file and any `NNNNNNNNNN.dict` file in a directory that held no store, and a store's
    /// writer deleted any `*.tmp` name at all. Now only the store's own temporary names go (one of
    /// its files' names, then `.tmp`), and nothing at all in a directory that holds no store.
    func testWritersDeleteOnlyTheStoresOwnLeftovers() throws {
        // The last three are named as a store's own files are: in a directory with no store, still not its own.
        let foreign = ["notes.tmp", "x.cask.tmp", "draft.hint.tmp", "0000000001.cask.tmp.tmp", "0000000007.dict", "0000000003.hint.tmp", "0000000009.hint"]
        func plant(in directory: String) throws -> [String: Data] {
            var planted: [String: Data] = [:]
            for (n, name) in foreign.enumerated() {
                planted[name] = Data("not Cask's \(n)\n".utf8)
                try planted[name]!.write(to: URL(fileURLWithPath: directory + "/" + name))
            }
            return planted
        }
        func check(_ planted: [String: Data], in directory: String, after what: String, file: StaticString = #filePath, line: UInt = #line) {
            for (name, content) in planted {
                XCTAssertEqual(try? Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)), content, "\(name) after \(what)", file: file, line: line)
            }
        }
        /// The sandbox's store replaced by a directory of one's own, holding the foreign files.
        func ownDirectory(_ box: Sandbox) throws -> [String: Data] {
            try FileManager.default.removeItem(atPath: box.store)
            try FileManager.default.createDirectory(atPath: box.store, withIntermediateDirectories: false)
            return try plant(in: box.store)
        }
        // A directory that holds no store yet: every writing command, and the library's open.
        for index in try writingCommands(Sandbox()).indices {
            let box = try Sandbox()
            let (name, arguments, input) = try writingCommands(box)[index]
            let planted = try ownDirectory(box)
            let run = try cask(arguments, stdin: input)
            check(planted, in: box.store, after: name)
            if name == "delete" || name == "compact" {
                // Commands that never make a store refuse a directory that holds none, and make nothing there.
                XCTAssertEqual(run.status, 1, "\(name): \(run.err)")
                XCTAssertEqual(run.err, "Error: \(box.store) holds no Cask store (no segment file); nothing was changed\n", name)
                XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: box.store)), Set(planted.keys), name)
            }
        }
        // rekey, which would make a store there and move the directory's files aside in its swap.
        let rekeyBox = try Sandbox()
        let rekeyPlanted = try ownDirectory(rekeyBox)
        let keyFile = rekeyBox.root.appending("key")
        XCTAssertEqual(try cask(["keygen", keyFile]).status, 0)
        let rekey = try cask(["rekey", rekeyBox.store, "--new-key-file", keyFile])
        XCTAssertEqual(rekey.status, 1, rekey.err)
        XCTAssertEqual(rekey.err, "Error: \(CaskError.notAStore(path: rekeyBox.store))\n")
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: rekeyBox.store)), Set(rekeyPlanted.keys))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: rekeyBox.root.path).filter { $0.contains("cask-rekey") }, [])

        let box = try Sandbox()
        let fresh = box.root.appending("fresh")
        try FileManager.default.createDirectory(atPath: fresh, withIntermediateDirectories: false)
        var planted = try plant(in: fresh)
        let store = try CaskStore.open(at: fresh)  // dictionaries on, as by default
        try store.put("k", Array(repeating: UInt8(ascii: "a"), count: 100))
        XCTAssertEqual(try store.get("k")?.count, 100)
        try store.close()
        check(planted, in: fresh, after: "the library's open")
        // A store: its own leftovers go, the rest stays, across writable opens and a compaction.
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: box.inStore("0000000009.cask.tmp")))
        try Data([4]).write(to: URL(fileURLWithPath: box.inStore("COMPACTION.tmp")))
        planted = try plant(in: box.store)
        planted.removeValue(forKey: "0000000007.dict")  // in a store, an unused dictionary file is its own,
        planted.removeValue(forKey: "0000000003.hint.tmp")  // and so is a leftover of its names
        planted.removeValue(forKey: "0000000009.hint")  // and a hint without a segment (kept by an open)
        let reopened = try CaskStore.open(at: box.store)
        try reopened.put("k4", Array("v".utf8))
        _ = try reopened.compact()
        try reopened.close()
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: box.store))
        XCTAssertFalse(names.contains("0000000009.cask.tmp"), "\(names)")
        XCTAssertFalse(names.contains("COMPACTION.tmp"), "\(names)")
        XCTAssertFalse(names.contains("0000000003.hint.tmp"), "\(names)")
        check(planted, in: box.store, after: "a writer's open and a compaction")
        var readOnly = CaskStore.Options()
        readOnly.readOnly = true
        XCTAssertEqual(try CaskStore.open(at: box.store, options: readOnly).get("k2"), Array("value of k2".utf8))
    }

    // MARK: Outputs

    /// What `cask export` writes for the sandbox's store, to standard output.
    private func exported(_ box: Sandbox) throws -> Data {
        let run = try cask(["export", box.store])
        XCTAssertEqual(run.status, 0, run.err)
        return run.stdout
    }

    /// Reads a FIFO to its end on another thread (the export opens it for writing meanwhile).
    private final class FIFOReader: @unchecked Sendable {
        private let path: String
        private var data = Data()  // Written by the reading thread before `done` is signalled.
        private let done = DispatchSemaphore(value: 0)

        init(_ path: String) {
            self.path = path
            Thread.detachNewThread { [self] in
                if let handle = FileHandle(forReadingAtPath: path) { data = handle.readDataToEndOfFile() }
                done.signal()
            }
        }

        /// What was read, or nil when nothing wrote to the FIFO within 30 s (a writer of our own
        /// then opens and closes the path, which ends the reading thread if it is still a FIFO).
        func result() -> Data? {
            if done.wait(timeout: .now() + 30) == .timedOut {
                let fd = open(path, O_WRONLY | O_NONBLOCK)
                if fd >= 0 { close(fd) }
                return nil
            }
            return data
        }
    }

    /// Issue 27, finding 2: `export --output F` renamed `F.tmp` over whatever F was, so a FIFO or a
    /// link to one became a regular file. Now they are written through and stay what they were.
    func testExportWritesThroughFIFOsAndLinksToThem() throws {
        let box = try Sandbox()
        let expected = try exported(box)
        let fifo = box.root.appending("pipe")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let link = box.root.appending("link-to-pipe")
        try symlink(fifo, at: link)
        for output in [fifo, link] {
            let reader = FIFOReader(fifo)
            let run = try cask(["export", box.store, "--output", output])
            XCTAssertEqual(run.status, 0, run.err)
            XCTAssertEqual(reader.result(), expected, output)
            XCTAssertEqual(run.out, "", "the summary must not go where the export goes")
            XCTAssertTrue(run.err.hasSuffix("exported 3 keys to \(output)\n"), run.err)
            var info = stat()
            XCTAssertEqual(lstat(fifo, &info), 0)
            XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO, "the FIFO was replaced")
            XCTAssertEqual(lstat(link, &info), 0)
            XCTAssertEqual(info.st_mode & S_IFMT, S_IFLNK, "the link was replaced")
        }
        // Standard output named as a file (the process's own pipe here).
        let run = try cask(["export", box.store, "--output", "/dev/stdout"])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.stdout, expected)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: box.root.path).sorted(), ["link-to-pipe", "pipe", "s", "victim"])
    }

    /// As a user other than root (CI runs as root): `--output /dev/stdout` wrote `/dev/stdout.tmp`,
    /// which only root may create; now the user's own pipe is written through.
    func testExportToStandardOutputAsAnotherUser() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("needs root and setpriv(1) to run the tool as user 65534")
        }
        let box = try Sandbox()
        let expected = try exported(box)
        // Let user 65534 read the store and reach the tool.
        for path in [box.root.path, box.store] + (try FileManager.default.contentsOfDirectory(atPath: box.store)).map(box.inStore) {
            XCTAssertEqual(chmod(path, 0o755), 0, path)
        }
        let script = "'\(ToolTests.toolPath)' export '\(box.store)' --output /dev/stdout | cat"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", script]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard !stderr.contains("Permission denied") || stderr.contains("/dev/stdout") else {
            throw XCTSkip("user 65534 cannot run the tool here: \(stderr)")
        }
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        XCTAssertEqual(stdout, expected, stderr)
        XCTAssertTrue(stderr.hasSuffix("exported 3 keys to /dev/stdout\n"), stderr)
    }

    /// A link to a regular file: the file it names gets the export (atomically), the link stays.
    func testExportThroughALinkToARegularFileKeepsTheLink() throws {
        let box = try Sandbox()
        let expected = try exported(box)
        let link = box.root.appending("latest.jsonl")
        try symlink(box.victim, at: link)
        let run = try cask(["export", box.store, "--output", link])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, "exported 3 keys to \(link)\n")
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: link), box.victim)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: box.victim)), expected)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: box.root.path).sorted(), ["latest.jsonl", "s", "victim"],
                       "no temporary file is left")
    }

    /// `--output` inside the store (its own segment, or a new name there) is refused before anything
    /// is written; so are a directory and a dangling link.
    func testExportRefusesOutputsInsideTheStoreDirectoriesAndDanglingLinks() throws {
        let box = try Sandbox()
        let segment = box.inStore(SegmentName.segment(1))
        let storeFiles = try FileManager.default.contentsOfDirectory(atPath: box.store).sorted()
        let segmentBytes = try Data(contentsOf: URL(fileURLWithPath: segment))
        let before = try box.outside()
        for output in [segment, box.inStore("export.jsonl"), box.root.appending("./s/../s/x.jsonl")] {
            let run = try cask(["export", box.store, "--output", output])
            XCTAssertEqual(run.status, 64, "\(output): \(run.err)")
            XCTAssertTrue(run.err.hasPrefix("Error: --output \(output) is inside the store directory \(box.store); write the export outside it\n"), run.err)
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: segment)), segmentBytes)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: box.store).sorted(), storeFiles)

        let directory = box.root.appending("out")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        var run = try cask(["export", box.store, "--output", directory])
        XCTAssertEqual(run.status, 1, run.err)
        XCTAssertEqual(run.err, "Error: cannot write \(directory): it is a directory; name a file\n")
        let dangling = box.root.appending("dangling")
        try symlink(box.root.appending("missing/file"), at: dangling)
        run = try cask(["export", box.store, "--output", dangling])
        XCTAssertEqual(run.status, 1, run.err)
        XCTAssertEqual(run.err, "Error: cannot write \(dangling): it is a symbolic link to a file that does not exist; remove the link or name another file\n")
        var after = try box.outside()
        after["out"] = nil
        after["dangling"] = nil
        XCTAssertEqual(after, before)
    }

    // MARK: A nearly full disk

    /// A 4 MiB tmpfs mounted for the test (root only), unmounted by `unmount()`.
    private struct SmallFileSystem {
        let mountPoint: TemporaryDirectory

        init() throws {
            mountPoint = TemporaryDirectory("cask-full-disk")
            let mount = Process()
            mount.executableURL = URL(fileURLWithPath: "/bin/mount")
            mount.arguments = ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint.path]
            mount.standardError = FileHandle.nullDevice
            guard getuid() == 0, (try? mount.run()) != nil, ({ mount.waitUntilExit(); return mount.terminationStatus == 0 })() else {
                throw XCTSkip("needs root and mount(8) to make a small tmpfs")
            }
        }

        /// Fills it but for `bytes`.
        func fill(leaving bytes: Int) throws {
            var info = statvfs()
            XCTAssertEqual(statvfs(mountPoint.path, &info), 0)
            let free = Int(info.f_bavail) * Int(info.f_frsize)
            try Data(count: free - bytes).write(to: URL(fileURLWithPath: mountPoint.appending("filler")))
            XCTAssertEqual(statvfs(mountPoint.path, &info), 0)
            XCTAssertLessThanOrEqual(Int(info.f_bavail) * Int(info.f_frsize), bytes, "the filler left more room than meant")
        }

        func unmount() {
            let unmount = Process()
            unmount.executableURL = URL(fileURLWithPath: "/bin/umount")
            unmount.arguments = [mountPoint.path]
            try? unmount.run()
            unmount.waitUntilExit()
        }
    }

    /// Issue 27, finding 7: the headroom a store keeps is its active segment's reserved space (1 to
    /// 2 MiB ahead of its last record, FORMAT.md "Reserved space"). On a disk with not a byte free,
    /// deletes land in it, and a compaction, which seals the segment, gives it back for its copy.
    func testDeletesAndACompactionWorkOnADiskWithNoFreeSpace() throws {
        let disk = try SmallFileSystem()
        defer { disk.unmount() }
        let dir = disk.mountPoint.appending("s")
        var options = CaskStore.Options()
        options.automaticCompaction = false
        let store = try CaskStore.open(at: dir, options: options)
        var values: [String: [UInt8]] = [:]
        for index in 0..<150 {
            for _ in 0..<2 {
                let value = (0..<1024).map { _ in UInt8.random(in: 0 ... 255) }
                try store.put("bulk\(index)", value)
                values["bulk\(index)"] = value
            }
        }
        // Fill the file system to the last byte.
        let fillerPath = disk.mountPoint.appending("filler")
        XCTAssertTrue(FileManager.default.createFile(atPath: fillerPath, contents: nil))
        let filler = try XCTUnwrap(FileHandle(forWritingAtPath: fillerPath))
        for size in [1 << 16, 1 << 12, 1] {
            let chunk = Data(count: size)
            while (try? filler.write(contentsOf: chunk)) != nil {}
        }
        try filler.close()
        var info = statvfs()
        XCTAssertEqual(statvfs(disk.mountPoint.path, &info), 0)
        XCTAssertEqual(info.f_bavail, 0, "the disk still has room")
        for index in 0..<50 {
            XCTAssertTrue(try store.delete("bulk\(index)"))
            values["bulk\(index)"] = nil
        }
        let result = try store.compact()
        XCTAssertGreaterThan(result.segmentsCompacted, 0)
        XCTAssertEqual(try store.statistics().deadBytes, 0)
        try store.close()
        let reopened = try CaskStore.open(at: dir, options: .readOnly)
        XCTAssertTrue(reopened.recoveryReport.isClean, "\(reopened.recoveryReport)")
        XCTAssertEqual(reopened.count, values.count)
        for (key, value) in values { XCTAssertEqual(try reopened.get(key), value, key) }
        try reopened.close()
    }

    /// Issue 27, finding 7: on a disk with no room to copy every segment's live records at once, a
    /// compaction goes one segment at a time, deadest first — each freeing its file before the
    /// next — so space comes back through Cask with room for one segment's live records.
    func testCompactionOnANearlyFullDiskGoesOneSegmentAtATime() throws {
        let disk = try SmallFileSystem()
        defer { disk.unmount() }
        let dir = disk.mountPoint.appending("s")
        var options = CaskStore.Options()
        options.automaticCompaction = false
        options.maxSegmentSize = 64 << 10
        var store = try CaskStore.open(at: dir, options: options)
        // 13 segments of 1 KiB values, each overwritten at once: every segment half dead, about
        // 400 KiB live in all.
        var values: [String: [UInt8]] = [:]
        for index in 0..<400 {
            for _ in 0..<2 {
                let value = (0..<1024).map { _ in UInt8.random(in: 0 ... 255) }
                try store.put("bulk\(index)", value)
                values["bulk\(index)"] = value
            }
        }
        try store.close()
        try disk.fill(leaving: 160 << 10)
        store = try CaskStore.open(at: dir, options: options)
        let before = try store.statistics()
        XCTAssertGreaterThan(before.liveBytes, 300 << 10, "more live data than the free space: all at once cannot fit")
        let result = try store.compact()
        XCTAssertEqual(result.segmentsCompacted, before.segments.count, "every segment, one at a time: \(result)")
        XCTAssertEqual(try store.statistics().deadBytes, 0)
        try store.close()
        store = try CaskStore.open(at: dir, options: options)
        XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
        for (key, value) in values { XCTAssertEqual(try store.get(key), value, key) }
        try store.close()
    }

    /// Issue 27, finding 7: a 1-byte put needed more than 2 MiB free (the writer reserved its whole
    /// step or failed), so on a nearly full disk not even a delete could free space. On a 4 MiB
    /// tmpfs (root only) filled to 64 KiB of free space, puts and deletes of small values go on.
    func testSmallWritesGoOnWhenTheDiskHasNoRoomForAReservationStep() throws {
        let mountPoint = TemporaryDirectory("cask-full-disk")
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint.path]
        mount.standardError = FileHandle.nullDevice
        guard getuid() == 0, (try? mount.run()) != nil, ({ mount.waitUntilExit(); return mount.terminationStatus == 0 })() else {
            throw XCTSkip("needs root and mount(8) to make a small tmpfs")
        }
        defer {
            let unmount = Process()
            unmount.executableURL = URL(fileURLWithPath: "/bin/umount")
            unmount.arguments = [mountPoint.path]
            try? unmount.run()
            unmount.waitUntilExit()
        }
        let dir = mountPoint.appending("s")
        var options = CaskStore.Options()
        options.automaticCompaction = false
        var store = try CaskStore.open(at: dir, options: options)
        try store.put("first", [1])
        // 300 KiB of values, half of them overwritten: a compaction has 150 KiB to copy.
        var values: [String: [UInt8]] = [:]
        for round in 0..<2 {
            for index in 0..<150 where round == 0 || index % 2 == 0 {
                let value = (0..<1024).map { _ in UInt8.random(in: 0 ... 255) }
                try store.put("bulk\(index)", value)
                values["bulk\(index)"] = value
            }
        }
        try store.close()
        // Fill the file system but for 64 KiB.
        var info = statvfs()
        XCTAssertEqual(statvfs(mountPoint.path, &info), 0)
        let free = Int(info.f_bavail) * Int(info.f_frsize)
        try Data(count: free - (64 << 10)).write(to: URL(fileURLWithPath: mountPoint.appending("filler")))
        XCTAssertEqual(statvfs(mountPoint.path, &info), 0)
        XCTAssertLessThanOrEqual(Int(info.f_bavail) * Int(info.f_frsize), 64 << 10, "the filler left more room than meant")
        store = try CaskStore.open(at: dir, options: options)
        // A compaction has no room for its copy: it fails as a full disk and changes nothing, and
        // the small writes that free space still go through after it.
        XCTAssertThrowsError(try store.compact()) { error in
            guard case .diskFull? = error as? CaskError else { return XCTFail("\(error)") }
        }
        for index in 0..<10 { try store.put("small\(index)", [UInt8(index)]) }
        try store.delete("first")
        try store.close()
        store = try CaskStore.open(at: dir, options: options)
        XCTAssertTrue(store.recoveryReport.isClean, "\(store.recoveryReport)")
        for (key, value) in values { XCTAssertEqual(try store.get(key), value, key) }
        XCTAssertNil(try store.get("first"))
        for index in 0..<10 { XCTAssertEqual(try store.get("small\(index)"), [UInt8(index)]) }
        // A value larger than the free space (random bytes: LZ4 cannot shrink them) still fails
        // cleanly, and loses nothing.
        let large = (0..<(1 << 20)).map { _ in UInt8.random(in: 0 ... 255) }
        XCTAssertThrowsError(try store.put("large", large)) { error in
            guard case .diskFull? = error as? CaskError else { return XCTFail("\(error)") }
        }
        try store.put("after", [9])
        try store.close()
        store = try CaskStore.open(at: dir, options: options)
        XCTAssertEqual(try store.get("small9"), [9])
        XCTAssertEqual(try store.get("after"), [9])
        XCTAssertNil(try store.get("large")?.count)
        try store.close()
    }

    // MARK: Terminals and paths

    /// Runs the tool on a pseudo-terminal (Swift's Glibc module has no `posix_openpt`, Python's
    /// `pty` has): `put` and `import` with standard input on it, what they read typed on its
    /// master side and ended with Ctrl-D; then `export --output` naming it. Prints, as JSON, each
    /// command's exit status (-1: still running 10 s after its input ended), what the export
    /// wrote to the terminal, and whether the terminal is still a character device.
    private static let terminalScript = #"""
        import json, os, pty, stat, subprocess, sys, time
        tool, store = sys.argv[1], sys.argv[2]
        master, slave = pty.openpty()
        path = os.ttyname(slave)
        def on_terminal(arguments, typed):
            process = subprocess.Popen([tool] + arguments, stdin=slave, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(0.2)
            os.write(master, typed + b"\x04")
            try:
                process.wait(timeout=10)
                return process.returncode
            except subprocess.TimeoutExpired:
                process.kill()
                return -1
        def drain():
            import select
            seen = b""
            while select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 65536)
            return seen.decode()
        result = {"put": on_terminal(["put", store, "typed"], b"hello\n"),
                  "import": on_terminal(["import", store], b'{"key":"imported","value":"x"}\n')}
        drain()
        result["export"] = subprocess.run([tool, "export", store, "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        result["shown"] = drain().replace("\r\n", "\n")
        result["terminal"] = stat.S_ISCHR(os.stat(path).st_mode)
        print(json.dumps(result))
        """#

    /// Terminals as inputs and outputs: `put` and `import` read a terminal to its end of input
    /// (`import` waited forever: its reader swallowed the one end-of-input a terminal gives), and
    /// `export --output` writes through a terminal, which stays a terminal.
    func testTerminalsAsInputsAndOutputs() throws {
        let box = try Sandbox()
        let before = try box.outside()
        let script = TemporaryDirectory("cask-terminal")
        let scriptPath = script.appending("terminal.py")
        try Data(Self.terminalScript.utf8).write(to: URL(fileURLWithPath: scriptPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", scriptPath, ToolTests.toolPath, box.store]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            if stderr.contains("out of pty devices") || stderr.contains("No such file or directory: '/dev/ptmx'") {
                throw XCTSkip("no pseudo-terminals here: \(stderr)")
            }
            return XCTFail("the terminal script failed: \(stderr)")
        }
        struct Result: Decodable {
            var put: Int
            var `import`: Int
            var export: Int
            var shown: String
            var terminal: Bool
        }
        let result = try JSONDecoder().decode(Result.self, from: printed)
        XCTAssertEqual(result.put, 0, "put from a terminal (-1: it did not end)")
        XCTAssertEqual(result.import, 0, "import from a terminal (-1: it did not end)")
        XCTAssertEqual(result.export, 0)
        XCTAssertTrue(result.terminal, "the terminal is still a character device")
        let store = try CaskStore.open(at: box.store, options: .readOnly)
        XCTAssertEqual(try store.get("typed"), Array("hello\n".utf8))
        XCTAssertEqual(try store.get("imported"), Array("x".utf8))
        try store.close()
        XCTAssertEqual(result.shown, String(decoding: try exported(box), as: UTF8.self))
        XCTAssertEqual(try box.outside(), before)
    }

    /// Issue 27, finding 9: a path that is not UTF-8 (Cask's paths are Swift strings) is refused
    /// as a usage error that shows the path, escaped, and says what to do — for the store and for an output.
    func testPathsThatAreNotUTF8AreRefusedByName() throws {
        let box = try Sandbox()
        let before = try box.outside()
        for (arguments, message) in [
            ("put \"$(printf 'st\\377')\" k", #"Error: <dir> is not valid UTF-8: 'st\xff' (cask takes UTF-8 paths only: rename it"#),
            ("export \"\(box.store)\" --output \"$(printf 'out\\376')\"", #"Error: --output is not valid UTF-8: 'out\xfe' (cask takes UTF-8 paths only"#),
        ] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "cd \"\(box.root.path)\" && printf v | \"\(ToolTests.toolPath)\" " + arguments]
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            process.waitUntilExit()
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            XCTAssertEqual(process.terminationStatus, 64, stderr)
            XCTAssertTrue(stderr.hasPrefix(message), stderr)
        }
        XCTAssertEqual(try box.outside(), before)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: box.root.path).sorted(), ["s", "victim"])
    }
}
