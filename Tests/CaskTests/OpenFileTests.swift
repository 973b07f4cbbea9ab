import XCTest
@testable import Cask
import CaskTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// ``OpenFile``, the descriptor that closes itself: it closes exactly once (at the end of its
/// scope, or at ``OpenFile/close()``), ``OpenFile/take()`` hands the descriptor over without
/// closing it, and every path that throws closes it. Checked on the trace of a
/// ``FaultInjectingFileSystem``, which records each `close` with the path its descriptor was opened with.
final class OpenFileTests: XCTestCase {
    private typealias Rule = FaultInjectingFileSystem.Rule

    /// The trace as "operation name", the name being the path's last component.
    private func calls(_ fileSystem: FaultInjectingFileSystem) -> [String] {
        fileSystem.trace.map { "\($0.operation.rawValue) \($0.path.split(separator: "/").last.map(String.init) ?? $0.path)" }
    }

    func testClosesOnceAtTheEndOfItsScopeNotAtItsLastUse() throws {
        let directory = TemporaryDirectory("cask-openfile")
        defer { directory.remove() }
        let fileSystem = FaultInjectingFileSystem()
        do {
            let file = try fileSystem.openFile(directory.appending("f"), flags: O_RDWR | O_CREAT, mode: 0o600)
            let size = try fileSystem.fileSize(file.descriptor)
            XCTAssertEqual(size, 0)
            XCTAssertEqual(fileSystem.count(.close), 0, "closed at its last use, before the end of its scope")
        }
        XCTAssertEqual(calls(fileSystem), ["open f", "fileSize f", "close f"])
    }

    func testCloseClosesAtOnceAndOnlyOnce() throws {
        let directory = TemporaryDirectory("cask-openfile")
        defer { directory.remove() }
        let fileSystem = FaultInjectingFileSystem()
        let path = directory.appending("f")
        do {
            let file = try fileSystem.openFile(path, flags: O_RDWR | O_CREAT, mode: 0o600)
            file.close()
            try fileSystem.unlink(path)
        }
        XCTAssertEqual(calls(fileSystem), ["open f", "close f", "unlink f"])
    }

    func testTakeHandsTheDescriptorOverWithoutClosingIt() throws {
        let directory = TemporaryDirectory("cask-openfile")
        defer { directory.remove() }
        let fileSystem = FaultInjectingFileSystem()
        let raw: Int32
        do {
            let file = try fileSystem.openFile(directory.appending("f"), flags: O_RDWR | O_CREAT, mode: 0o600)
            raw = file.take()
        }
        XCTAssertEqual(fileSystem.count(.close), 0)
        XCTAssertEqual(try fileSystem.fileSize(raw), 0, "the descriptor taken is still open")
        fileSystem.close(raw)
        XCTAssertEqual(calls(fileSystem), ["open f", "fileSize f", "close f"])
    }

    func testAFailedOpenHasNothingToClose() {
        let directory = TemporaryDirectory("cask-openfile")
        defer { directory.remove() }
        let fileSystem = FaultInjectingFileSystem()
        do {
            let file = try fileSystem.openFile(directory.appending("missing"), flags: O_RDONLY, mode: 0)
            XCTFail("opened \(file.descriptor)")
        } catch {
            XCTAssertEqual(error, .noEntry)
        }
        XCTAssertEqual(calls(fileSystem), ["open missing"])
    }

    /// A scoped use like the library's (open, stat, read, sync), failed at each of its calls in turn:
    /// the file is closed once, as the error leaves, and never when the open itself failed.
    func testEveryThrowingPathClosesOnce() throws {
        let directory = TemporaryDirectory("cask-openfile")
        defer { directory.remove() }
        let path = directory.appending("f")
        try PosixFileSystem().writeFileAtomically(path, directory: directory.path, bytes: Array("0123456789".utf8))

        func readAndSync(_ fileSystem: FaultInjectingFileSystem) throws(Errno) -> [UInt8] {
            let file = try fileSystem.openFile(path, flags: O_RDWR, mode: 0)
            let size = try fileSystem.fileSize(file.descriptor)
            var bytes = [UInt8](repeating: 0, count: Int(size))
            _ = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }
            try fileSystem.fsync(file.descriptor)
            return bytes
        }

        let steps: [FaultInjectingFileSystem.Operation] = [.open, .fileSize, .pread, .fsync]
        for failing in steps {
            let fileSystem = FaultInjectingFileSystem()
            fileSystem.fail(failing, with: .ioError)
            do {
                let bytes = try readAndSync(fileSystem)
                XCTFail("failing \(failing): read \(bytes.count) bytes")
            } catch {
                XCTAssertEqual(error, .ioError, "failing \(failing)")
            }
            let expected = steps.prefix(through: steps.firstIndex(of: failing)!).map { "\($0.rawValue) f" } + (failing == .open ? [] : ["close f"])
            XCTAssertEqual(calls(fileSystem), expected, "failing \(failing)")
        }
        let fileSystem = FaultInjectingFileSystem()
        XCTAssertEqual(try readAndSync(fileSystem), Array("0123456789".utf8))
        XCTAssertEqual(calls(fileSystem), ["open f", "fileSize f", "pread f", "fsync f", "close f"])
    }

    /// ``FileSystem/writeFileAtomically(_:directory:bytes:)`` failed at each of its calls in turn:
    /// every descriptor it opened is closed once, and the temporary file's before it is renamed or
    /// removed.
    func testWriteFileAtomicallyClosesBeforeRenameAndUnlinkOnEveryPath() throws {
        let bytes = Array("contents".utf8)
        func run(failingCall index: Int?) throws -> (calls: [FaultInjectingFileSystem.Call], error: Errno?) {
            let directory = TemporaryDirectory("cask-openfile")
            defer { directory.remove() }
            let fileSystem = FaultInjectingFileSystem()
            if let index { fileSystem.inject(Rule(nil, .callIndex(index), .fail(.ioError))) }
            do { try fileSystem.writeFileAtomically(directory.appending("f"), directory: directory.path, bytes: bytes) } catch {
                return (fileSystem.trace, error)
            }
            return (fileSystem.trace, nil)
        }
        let reference = try run(failingCall: nil)
        XCTAssertNil(reference.error)
        XCTAssertEqual(reference.calls.map(\.operation), [.open, .pwrite, .fdatasync, .close, .rename, .open, .fsync, .close])
        for call in reference.calls where call.operation.canFail {
            let failed = try run(failingCall: call.index)
            let what = "failing \(call)"
            XCTAssertEqual(failed.error, .ioError, what)
            var open: [String: Int] = [:]
            for traced in failed.calls {
                switch traced.operation {
                case .open where traced.injected == nil: open[traced.path, default: 0] += 1
                case .close:
                    XCTAssertEqual(open[traced.path], 1, "\(what): \(traced) closes a descriptor not open")
                    open[traced.path] = 0
                case .rename, .unlink:
                    XCTAssertEqual(open[traced.path] ?? 0, 0, "\(what): \(traced) while the file is open")
                default: break
                }
            }
            XCTAssertEqual(open.values.reduce(0, +), 0, "\(what): left open: \(open)")
        }
    }

    /// ``StoreLock`` holds its descriptor as an ``OpenFile``: a refused lock closes its descriptor
    /// after reading the holder's pid from it, and ``StoreLock/release()`` closes once however often called.
    func testStoreLockClosesWhenRefusedAndOnceOnRelease() throws {
        let directory = TemporaryDirectory("cask-openfile")
        defer { directory.remove() }
        let fileSystem = FaultInjectingFileSystem()
        let lock = try StoreLock(directory: directory.path, fileSystem: fileSystem)
        fileSystem.clearTrace()
        do {
            _ = try StoreLock(directory: directory.path, fileSystem: fileSystem)
            XCTFail("locked twice")
        } catch {
            // The holder is this process (it knows the files it holds): the error says so, and no
            // pid is read (the file's may be stale).
            XCTAssertEqual(error, .alreadyOpen(path: directory.path))
        }
        XCTAssertEqual(calls(fileSystem), ["open LOCK", "lock LOCK", "close LOCK"])
        fileSystem.clearTrace()
        lock.release()
        lock.release()
        XCTAssertEqual(calls(fileSystem), ["close LOCK"])
    }
}
