#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Cask
import Dispatch

/// A ``FileSystem`` for tests: forwards every call to ``PosixFileSystem`` and, by rule, makes
/// chosen calls fail the way a real disk does — `ENOSPC`, `EIO`, a short `pwrite` that really
/// puts its first bytes on disk, a failed `fdatasync`/`fsync`, a failed `rename`.
///
/// It records a trace of every call (operation, path, offset, length, injected error) so a test can
/// run a scenario once, then fail each call of the trace in turn. It also tracks, per file, how far
/// the data is durable (covered by a successful `fdatasync`/`fsync` that started after the bytes
/// were written), so tests can check what a durability mode promises.
///
/// Thread-safe: all state is behind one lock; the real I/O runs outside it. The lock is Cask's
/// pthread-based ``Lock`` rather than `Synchronization.Mutex`: on Linux a contended `Mutex` is
/// handed over by a PI futex inside the (uninstrumented) standard library, which the thread
/// sanitizer cannot see, so concurrency tests run under it would report false races.
package final class FaultInjectingFileSystem: FileSystem, Sendable {
    /// The calls of the ``FileSystem`` seam.
    package enum Operation: String, Sendable, CaseIterable {
        case open, close, pread, pwrite, fdatasync, fsync, ftruncate, fileSize, rename, unlink
        case makeDirectory, listDirectory, lock, isDirectory, isWritable, allocate

        /// Whether the call can report an error (the ones a fault can be injected into).
        package var canFail: Bool {
            switch self {
            case .close, .isDirectory, .isWritable: false
            default: true
            }
        }
    }

    /// Which calls a rule applies to, counted among the calls that match its operation and path.
    package enum Trigger: Sendable, Equatable {
        /// Only the `n`th matching call (1-based).
        case nth(Int)
        /// Every matching call after the first `n` (`after(0)`: every call).
        case after(Int)
        /// The call with this index in the whole trace (0-based, see ``Call/index``).
        case callIndex(Int)
        /// Every call from this trace index on.
        case fromCallIndex(Int)
    }

    /// What happens to a call a rule applies to.
    package enum Fault: Sendable, Equatable {
        /// The call fails with `errno` and does nothing.
        case fail(Errno)
        /// `pwrite` only: writes the first `bytes` bytes for real and returns that count (a short
        /// write); the next `pwrite` on the same descriptor then fails with `errno`, as on a disk
        /// that just filled up. With `bytes == 0` the call fails at once.
        case shortWrite(bytes: Int, then: Errno)
        /// The call is delayed by this many microseconds, then runs normally.
        case delay(microseconds: UInt32)
        /// The call waits at `gate` until the test opens it, then runs normally: lets a test
        /// stop one thread inside a call and act while it is there.
        case pause(Gate)
    }

    /// A barrier for ``Fault/pause(_:)``: calls that reach it wait until the test opens it.
    package final class Gate: Sendable, Equatable {
        private let arrived = DispatchSemaphore(value: 0)
        private let opened = DispatchSemaphore(value: 0)

        package init() {}

        /// Blocks until a call has arrived at the gate.
        package func waitUntilReached() { arrived.wait() }

        /// Blocks until a call has arrived at the gate or `seconds` have passed; returns whether
        /// one arrived.
        package func waitUntilReached(seconds: Double) -> Bool { arrived.wait(timeout: .now() + seconds) == .success }

        /// Lets the waiting call (and every later one) through.
        package func open() { opened.signal() }

        fileprivate func pass() {
            arrived.signal()
            opened.wait()
            opened.signal()  // stays open for the next one
        }

        package static func == (a: Gate, b: Gate) -> Bool { a === b }
    }

    package struct Rule: Sendable, Equatable {
        /// nil: any operation that can fail (for ``Fault/delay(microseconds:)`` and
        /// ``Fault/pause(_:)``: any operation).
        package var operation: Operation?
        /// Only calls on exactly this path.
        package var path: String?
        /// Only calls on a path ending with this (file name, extension, ...).
        package var pathSuffix: String?
        package var trigger: Trigger
        package var fault: Fault
        /// Once the rule fires with ``Fault/fail(_:)``, every later call that can fail fails with
        /// the same error, whatever its operation or path: a disk that died at that moment.
        package var latch: Bool

        package init(_ operation: Operation?, path: String? = nil, pathSuffix: String? = nil, _ trigger: Trigger, _ fault: Fault, latch: Bool = false) {
            self.operation = operation
            self.path = path
            self.pathSuffix = pathSuffix
            self.trigger = trigger
            self.fault = fault
            self.latch = latch
        }
    }

    /// One recorded call.
    package struct Call: Sendable, CustomStringConvertible {
        /// Position in the trace, from 0.
        package var index: Int
        package var operation: Operation
        /// The path, or for a descriptor the path it was opened with ("?" if unknown).
        package var path: String
        package var offset: Int64?
        package var length: Int?
        /// The error injected into this call, if any (real errors are not recorded here).
        package var injected: Errno?

        package var description: String {
            var text = "#\(index) \(operation.rawValue) \(path)"
            if let offset { text += " @\(offset)" }
            if let length { text += " len \(length)" }
            if let injected { text += " -> injected \(injected)" }
            return text
        }
    }

    private struct State {
        var rules: [(rule: Rule, matched: Int)] = []
        var trace: [Call] = []
        var recording = true
        var paths: [Int32: String] = [:]
        /// Descriptors whose next `pwrite` fails (the rest of a short write).
        var pendingWriteFailure: [Int32: Errno] = [:]
        /// Set when a latching rule fired: every call that can fail now fails with it.
        var latched: Errno?
        /// Per path: the end of the furthest byte written, and how far a completed sync covers.
        var written: [String: Int64] = [:]
        var durable: [String: Int64] = [:]
        /// Per thread: the path and end offset of its latest `pwrite`.
        var lastWrite: [UInt: (path: String, end: Int64)] = [:]
        var injectedCount = 0
    }

    private let real = PosixFileSystem()
    private let state = Lock(State())
    /// Whether the store may write its active segment through a mapping, as on the real file
    /// system. Off by default: those writes are no `pwrite` calls, so this file system neither
    /// sees them (in ``Call``s, or in how far a file is written and durable) nor faults them; only
    /// the `allocate` calls that reserve space for them.
    private let mappedWrites: Bool

    package init(mappedWrites: Bool = false) {
        self.mappedWrites = mappedWrites
    }

    package func supportsMappedWrites(in directory: String) -> Bool {
        mappedWrites && real.supportsMappedWrites(in: directory)
    }

    package func allocate(_ fd: Int32, offset: Int64, length: Int64) throws(Errno) {
        _ = try gate(.allocate, fd: fd, offset: offset, length: Int(length))
        try real.allocate(fd, offset: offset, length: length)
    }

    // MARK: Controlling faults

    package func inject(_ rule: Rule) {
        state.withLock { $0.rules.append((rule, 0)) }
    }

    /// Shorthand: fail the `n`th call (1-based) of `operation` with `errno`.
    package func fail(_ operation: Operation, pathSuffix: String? = nil, nth n: Int = 1, with errno: Errno) {
        inject(Rule(operation, pathSuffix: pathSuffix, .nth(n), .fail(errno)))
    }

    /// Shorthand: fail every call of `operation` from now on with `errno` (a disk that stays full).
    package func failAlways(_ operation: Operation, pathSuffix: String? = nil, with errno: Errno) {
        inject(Rule(operation, pathSuffix: pathSuffix, .after(0), .fail(errno)))
    }

    /// Lifts every fault (rules and the pending rest of short writes).
    package func removeAllRules() {
        state.withLock {
            $0.rules.removeAll()
            $0.pendingWriteFailure.removeAll()
            $0.latched = nil
        }
    }

    /// The calls recorded so far.
    package var trace: [Call] { state.withLock { $0.trace } }

    /// How many faults were injected: rules that fired (a short write and the failure that ends
    /// it count once) and calls failed by a latched rule.
    package var injectedCount: Int { state.withLock { $0.injectedCount } }

    package func clearTrace() {
        state.withLock { $0.trace.removeAll() }
    }

    /// Turns trace recording on or off (trace indexes keep counting only while recording).
    package func setRecording(_ on: Bool) {
        state.withLock { $0.recording = on }
    }

    /// How many calls of `operation` the trace holds.
    package func count(_ operation: Operation) -> Int {
        state.withLock { $0.trace.reduce(0) { $0 + ($1.operation == operation ? 1 : 0) } }
    }

    /// Whether the latest `pwrite` made by the calling thread is covered by a sync that completed:
    /// after a `.fsync`-mode put returns, its record must be.
    package func isLastWriteOfCurrentThreadDurable() -> Bool {
        let thread = Self.currentThread
        return state.withLock { state in
            guard let last = state.lastWrite[thread] else { return true }
            return (state.durable[last.path] ?? 0) >= last.end
        }
    }

    private static var currentThread: UInt { UInt(pthread_self()) }

    // MARK: Deciding

    private enum Decision {
        case proceed
        case fail(Errno)
        case short(Int, Errno)
        case delay(UInt32)
        case pause(Gate)
    }

    /// Records the call and picks the fault (if any) that applies to it.
    private func decide(_ operation: Operation, path: String? = nil, fd: Int32? = nil, offset: Int64? = nil, length: Int? = nil) -> (Decision, String) {
        state.withLock { state in
            let resolvedPath = path ?? fd.flatMap { state.paths[$0] } ?? "?"
            let index = state.trace.count
            var decision = Decision.proceed
            var injected = false
            if let latched = state.latched, operation.canFail {
                decision = .fail(latched)
                injected = true
            } else if operation == .pwrite, let fd, let pending = state.pendingWriteFailure.removeValue(forKey: fd) {
                decision = .fail(pending)
            } else {
                // Every matching rule counts the call; the first one that fires decides.
                for position in state.rules.indices {
                    let rule = state.rules[position].rule
                    if let wanted = rule.operation, wanted != operation { continue }
                    if rule.operation == nil && !operation.canFail {
                        switch rule.fault {
                        case .delay, .pause: break
                        case .fail, .shortWrite: continue
                        }
                    }
                    if case .shortWrite = rule.fault, operation != .pwrite { continue }
                    if let path = rule.path, resolvedPath != path { continue }
                    if let suffix = rule.pathSuffix, !resolvedPath.hasSuffix(suffix) { continue }
                    state.rules[position].matched += 1
                    let matched = state.rules[position].matched
                    let fires = switch rule.trigger {
                    case .nth(let n): matched == n
                    case .after(let n): matched > n
                    case .callIndex(let i): index == i
                    case .fromCallIndex(let i): index >= i
                    }
                    guard fires, case .proceed = decision else { continue }
                    injected = true
                    switch rule.fault {
                    case .fail(let errno):
                        decision = .fail(errno)
                        if rule.latch { state.latched = errno }
                    case .shortWrite(let bytes, let errno):
                        decision = bytes > 0 && (length ?? 0) > bytes ? .short(bytes, errno) : .fail(errno)
                    case .delay(let microseconds):
                        decision = .delay(microseconds)
                        injected = false
                    case .pause(let gate):
                        decision = .pause(gate)
                        injected = false
                    }
                }
            }
            if injected { state.injectedCount += 1 }
            var call = Call(index: index, operation: operation, path: resolvedPath, offset: offset, length: length)
            switch decision {
            case .fail(let errno):
                call.injected = errno
            case .short(let bytes, let errno):
                call.injected = errno
                if let fd { state.pendingWriteFailure[fd] = errno }
                call.length = bytes
            case .proceed, .delay, .pause:
                break
            }
            if state.recording { state.trace.append(call) }
            return (decision, resolvedPath)
        }
    }

    /// Applies a decision for a call that has no partial form: throws or delays.
    private func gate(_ operation: Operation, path: String? = nil, fd: Int32? = nil, offset: Int64? = nil, length: Int? = nil) throws(Errno) -> String {
        let (decision, resolved) = decide(operation, path: path, fd: fd, offset: offset, length: length)
        switch decision {
        case .proceed, .short: break
        case .fail(let errno): throw errno
        case .delay(let microseconds): usleep(microseconds)
        case .pause(let gate): gate.pass()
        }
        return resolved
    }

    // MARK: FileSystem

    package func open(_ path: String, flags: Int32, mode: UInt32) throws(Errno) -> Int32 {
        _ = try gate(.open, path: path)
        let fd = try real.open(path, flags: flags, mode: mode)
        state.withLock {
            $0.paths[fd] = path
            $0.pendingWriteFailure[fd] = nil
            if flags & O_TRUNC != 0 { $0.written[path] = 0 }
        }
        return fd
    }

    package func close(_ fd: Int32) {
        _ = try? gate(.close, fd: fd)
        state.withLock {
            $0.paths[fd] = nil
            $0.pendingWriteFailure[fd] = nil
        }
        real.close(fd)
    }

    package func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        _ = try gate(.pread, fd: fd, offset: offset, length: buffer.count)
        return try real.pread(fd, into: buffer, at: offset)
    }

    package func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        let (decision, path) = decide(.pwrite, fd: fd, offset: offset, length: buffer.count)
        var toWrite = buffer
        switch decision {
        case .proceed: break
        case .fail(let errno): throw errno
        case .delay(let microseconds): usleep(microseconds)
        case .pause(let gate): gate.pass()
        case .short(let bytes, _): toWrite = UnsafeRawBufferPointer(rebasing: buffer[0..<bytes])
        }
        let written = try real.pwrite(fd, from: toWrite, at: offset)
        let thread = Self.currentThread
        state.withLock { state in
            let end = offset + Int64(written)
            state.written[path] = max(state.written[path] ?? 0, end)
            state.lastWrite[thread] = (path, end)
        }
        return written
    }

    package func fdatasync(_ fd: Int32) throws(Errno) {
        let path = try gate(.fdatasync, fd: fd)
        try syncing(path) { () throws(Errno) in try real.fdatasync(fd) }
    }

    package func fsync(_ fd: Int32) throws(Errno) {
        let path = try gate(.fsync, fd: fd)
        try syncing(path) { () throws(Errno) in try real.fsync(fd) }
    }

    /// Runs a sync; on success everything written to `path` before it started is durable.
    private func syncing(_ path: String, _ body: () throws(Errno) -> Void) throws(Errno) {
        let covered = state.withLock { $0.written[path] ?? 0 }
        try body()
        state.withLock { $0.durable[path] = max($0.durable[path] ?? 0, covered) }
    }

    package func ftruncate(_ fd: Int32, length: Int64) throws(Errno) {
        let path = try gate(.ftruncate, fd: fd, offset: length)
        try real.ftruncate(fd, length: length)
        state.withLock { state in
            state.written[path] = length
            if let durable = state.durable[path], durable > length { state.durable[path] = length }
        }
    }

    package func fileSize(_ fd: Int32) throws(Errno) -> Int64 {
        _ = try gate(.fileSize, fd: fd)
        return try real.fileSize(fd)
    }

    package func rename(_ from: String, to: String) throws(Errno) {
        _ = try gate(.rename, path: from)
        try real.rename(from, to: to)
        state.withLock { state in
            state.written[to] = state.written.removeValue(forKey: from)
            state.durable[to] = state.durable.removeValue(forKey: from)
        }
    }

    package func unlink(_ path: String) throws(Errno) {
        _ = try gate(.unlink, path: path)
        try real.unlink(path)
    }

    package func makeDirectory(_ path: String, mode: UInt32) throws(Errno) {
        _ = try gate(.makeDirectory, path: path)
        try real.makeDirectory(path, mode: mode)
    }

    package func listDirectory(_ path: String) throws(Errno) -> [String] {
        _ = try gate(.listDirectory, path: path)
        return try real.listDirectory(path)
    }

    package func lock(_ fd: Int32, exclusive: Bool) throws(Errno) {
        _ = try gate(.lock, fd: fd)
        try real.lock(fd, exclusive: exclusive)
    }

    package func isDirectory(_ path: String) -> Bool? {
        _ = try? gate(.isDirectory, path: path)
        return real.isDirectory(path)
    }

    package func isWritable(_ path: String) -> Bool {
        _ = try? gate(.isWritable, path: path)
        return real.isWritable(path)
    }
}
