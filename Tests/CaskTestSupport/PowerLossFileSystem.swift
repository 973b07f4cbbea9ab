#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Cask
import Dispatch

/// A ``FileSystem`` for tests that simulates a power cut: it forwards every call to
/// ``PosixFileSystem`` (so the store runs on a real directory, mappings included) and keeps, beside
/// it, a model of what a disk with a page cache would still hold if the power went out now.
///
/// **The model** (conservative: what POSIX promises, not what ext4 happens to do):
/// 1. File contents. Each file (inode) has a durable content and the list of changes made since
///    (`pwrite`s, `ftruncate`s, `O_TRUNC`). A successful `fsync` or `fdatasync` of *that* file makes
///    all of them durable. Nothing else does: not a sync of another file, of the directory, `close`.
/// 2. Directory entries. Creating (`open` with `O_CREAT`), renaming and unlinking a name in the store
///    directory become durable only with an `fsync` of the directory itself. Until then a created
///    file may vanish, a renamed file may be back under its old name (with the new name gone, or
///    showing what it named before), and an unlinked file may come back, with the content its inode
///    has by rule 1. A file's content and its name are independent: a synced file under an unsynced
///    name is lost; a synced name may point to a file whose writes were not synced.
/// 3. The cut. From the call chosen by ``cutPower(atCall:)`` (counting only calls that can fail), every
///    call fails with `EIO` and does nothing; `close` still releases the descriptor. Reads through
///    `mmap` do not go through the seam and are unaffected; nothing can write through them.
/// 4. After the cut, ``writeCrashImage(to:_:)`` writes what the disk may hold into a fresh directory:
///    the durable state plus some of the unsynced changes, as ``Survival`` chooses. Either each file
///    independently keeps an in-order prefix of its changes, the last one possibly torn at a random
///    byte (a write only partly on disk), and optionally loses unsynced overwrites of existing bytes
///    (pages written back out of order), while the directory keeps an in-order prefix of its
///    operations (a journal commits them in order); or all changes to all files and names are cut
///    at one point of the order in which they were made (a disk that writes back in order).
///
/// Real `fsync`/`fdatasync` calls are not made (the model decides durability), which keeps the tests
/// fast. Only entries directly inside `directory` are modelled; the directory itself is assumed to
/// exist durably before the store opens. Calls are serialized under one lock (the real I/O included),
/// so that the call order, the model and the real files always agree.
package final class PowerLossFileSystem: FileSystem, Sendable {
    /// What survives the cut of the unsynced changes.
    package enum Survival: Sendable, Equatable, CustomStringConvertible {
        /// Only what was synced: every unsynced change is lost (the worst case for durability).
        case syncedOnly
        /// Everything written: the page cache made it to disk (what a process crash leaves).
        case everything
        /// A random in-order prefix of each file's changes (the last one torn at a random byte) and
        /// of the directory operations, chosen independently by `seed`; with `revertOverwrites`,
        /// unsynced writes over existing bytes may also be lost while later writes survive.
        case random(seed: UInt64, revertOverwrites: Bool)
        /// The changes made before a random point (chosen by `seed`), in the order they were made
        /// across all files and names, the one at that point torn if it is a write.
        case ordered(seed: UInt64)

        package var description: String {
            switch self {
            case .syncedOnly: "synced only"
            case .everything: "everything written"
            case .random(let seed, let revert): "random \(seed)\(revert ? " with overwrites reverted" : "")"
            case .ordered(let seed): "in order \(seed)"
            }
        }
    }

    /// One call that can fail, for diagnostics.
    package struct Call: Sendable, CustomStringConvertible {
        package var index: Int
        package var operation: String
        package var name: String
        package var detail: String

        package var description: String { "#\(index) \(operation) \(name)\(detail.isEmpty ? "" : " " + detail)" }
    }

    private enum Change {
        case write(offset: Int, bytes: [UInt8])
        case truncate(length: Int)
    }

    private struct Inode {
        var durable: [UInt8]
        var current: [UInt8]
        /// Changes since the last sync, in order: `durable` + these = `current`.
        var unsynced: [(order: Int, change: Change)] = []
    }

    private enum NameChange {
        case link(name: String, inode: Int)
        case unlink(name: String)
        case rename(from: String, to: String)
    }

    private enum Handle {
        case file(inode: Int, name: String)
        case directory
        /// A descriptor on something the model does not track (another directory's file).
        case untracked(path: String)
    }

    private struct State {
        var inodes: [Int: Inode] = [:]
        var nextInode = 1
        var names: [String: Int] = [:]
        var durableNames: [String: Int] = [:]
        var unsyncedNames: [(order: Int, change: NameChange)] = []
        /// Orders the unsynced changes of all files and names.
        var nextOrder = 0
        var handles: [Int32: Handle] = [:]
        var calls = 0
        var cutAt: Int?
        var cutCall: Call?
        var trace: [Call] = []
        var recordTrace = false
        var holds: [(thread: UInt, operation: String, name: String, longerThan: Int, hold: Hold)] = []

        mutating func takeOrder() -> Int {
            defer { nextOrder += 1 }
            return nextOrder
        }
    }

    /// The store directory, without a trailing slash.
    package let directory: String
    private let real = PosixFileSystem()
    private let state: Lock<State>

    /// Models `directory` (which must exist), taking every file already in it as durable.
    package init(directory: String) throws(Errno) {
        self.directory = directory
        var initial = State()
        for name in try real.listDirectory(directory) {
            let path = directory + "/" + name
            guard real.isDirectory(path) == false else { continue }
            let bytes = try Self.readFile(path, real)
            initial.inodes[initial.nextInode] = Inode(durable: bytes, current: bytes)
            initial.names[name] = initial.nextInode
            initial.durableNames[name] = initial.nextInode
            initial.nextInode += 1
        }
        state = Lock(initial)
    }

    // MARK: The cut

    /// Cuts the power at the `n`th call that can fail (0-based): it and every later one fail with
    /// `EIO`. `nil` never cuts (until ``cutPowerNow()``).
    package func cutPower(atCall n: Int?) {
        state.withLock { $0.cutAt = n }
    }

    /// Cuts the power before the next call.
    package func cutPowerNow() {
        state.withLock { state in
            if state.cutAt.map({ $0 > state.calls }) ?? true { state.cutAt = state.calls }
        }
    }

    /// Whether the power has been cut (a call reached the cut, or ``cutPowerNow()`` was called).
    package var isCut: Bool { state.withLock { s in s.cutAt.map { s.calls >= $0 } ?? false } }

    /// The first call that failed because of the cut, if any did.
    package var cutCall: Call? { state.withLock { $0.cutCall } }

    /// Calls that can fail made so far (those refused by the cut included).
    package var callCount: Int { state.withLock { $0.calls } }

    /// The calls that can fail, in order (with `recordTrace`).
    package var trace: [Call] { state.withLock { $0.trace } }

    /// Records every call that can fail in ``trace`` (off by default: it costs time).
    package func setRecordingTrace(_ on: Bool) {
        state.withLock { $0.recordTrace = on }
    }

    /// A call stopped before it runs, until the test lets it go: see ``holdNextCall(_:name:)``.
    package final class Hold: Sendable {
        private let arrived = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)

        /// Blocks until the call has arrived, or `seconds` have passed; returns whether it arrived.
        package func waitUntilHeld(seconds: Double = 30) -> Bool {
            arrived.wait(timeout: .now() + seconds) == .success
        }

        /// Lets the call go on (to meet the cut, if the power was cut meanwhile).
        package func release() { released.signal() }

        fileprivate func stop() {
            arrived.signal()
            released.wait()
        }
    }

    /// Stops the next call of `operation` (`"fdatasync"`, `"pwrite"`, …) on the file `name` made by
    /// the calling thread while the file holds more than `longerThan` bytes, before it is counted or
    /// runs, until the returned hold is released: lets a test act, on another thread, while a write
    /// waits for its sync.
    package func holdNextCall(_ operation: String, name: String, longerThan: Int = 0) -> Hold {
        let hold = Hold()
        state.withLock { $0.holds.append((UInt(pthread_self()), operation, name, longerThan, hold)) }
        return hold
    }

    // MARK: The image after the cut

    /// What the disk holds after the cut under `survival`: file name → content.
    package func crashImage(_ survival: Survival) -> [String: [UInt8]] {
        state.withLock { state in
            var random = SeededGenerator(seed: 0)
            // Directory entries: the durable ones, then an in-order prefix of the rest.
            let namesKept: Int
            // For `.ordered`: every change before this point of the order survives, the one at it torn.
            var cutOrder = Int.max
            switch survival {
            case .syncedOnly:
                namesKept = 0
            case .everything:
                namesKept = state.unsyncedNames.count
            case .random(let seed, _):
                random = SeededGenerator(seed: seed)
                namesKept = Self.prefixLength(state.unsyncedNames.count, &random)
            case .ordered(let seed):
                random = SeededGenerator(seed: seed)
                let orders = (state.unsyncedNames.map(\.order) + state.inodes.values.flatMap { $0.unsynced.map(\.order) }).sorted()
                cutOrder = orders.isEmpty ? 0 : orders[Int.random(in: 0..<orders.count, using: &random)] + (random.next() % 4 == 0 ? 1 : 0)
                namesKept = state.unsyncedNames.prefix { $0.order < cutOrder }.count
            }
            var names = state.durableNames
            for pending in state.unsyncedNames.prefix(namesKept) { Self.apply(pending.change, to: &names) }
            // Contents: each inode once, in a fixed order (the random choices must be replayable).
            var contents: [Int: [UInt8]] = [:]
            for inode in Set(names.values).sorted() {
                let node = state.inodes[inode]!
                switch survival {
                case .syncedOnly: contents[inode] = node.durable
                case .everything: contents[inode] = node.current
                case .random(_, let revert): contents[inode] = Self.survivingContent(node, revertOverwrites: revert, &random)
                case .ordered: contents[inode] = Self.content(node, before: cutOrder, &random)
                }
            }
            return names.mapValues { contents[$0]! }
        }
    }

    /// Writes ``crashImage(_:)`` into `destination` (created; it must not exist).
    package func writeCrashImage(to destination: String, _ survival: Survival) throws(Errno) {
        try real.makeDirectory(destination, mode: 0o700)
        for (name, bytes) in crashImage(survival) {
            let fd = try real.open(destination + "/" + name, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
            defer { real.close(fd) }
            try bytes.withBytes { (raw) throws(Errno) in try real.writeAll(fd, from: raw, at: 0) }
        }
    }

    /// Checks the model against the real directory: ``Survival/everything`` must be exactly what it
    /// holds. Returns the first difference, or nil. (A test of this file system, run by its users.)
    package func modelDisagreement() -> String? {
        let image = crashImage(.everything)
        guard let names = try? real.listDirectory(directory) else { return "cannot list \(directory)" }
        let files = names.filter { real.isDirectory(directory + "/" + $0) == false }
        if Set(files) != Set(image.keys) {
            return "the model has files \(image.keys.sorted()), the directory \(files.sorted())"
        }
        for name in files {
            guard let bytes = try? Self.readFile(directory + "/" + name, real) else { return "cannot read \(name)" }
            if bytes != image[name] { return "\(name): the model has \(image[name]!.count) bytes, the file \(bytes.count) (or other bytes)" }
        }
        return nil
    }

    private static func prefixLength(_ count: Int, _ random: inout SeededGenerator) -> Int {
        guard count > 0 else { return 0 }
        switch random.next() % 3 {
        case 0: return 0
        case 1: return count
        default: return Int.random(in: 0...count, using: &random)
        }
    }

    /// The durable content plus an in-order prefix of the unsynced changes, the last one possibly
    /// torn; overwrites of bytes the file already had may be skipped.
    private static func survivingContent(_ node: Inode, revertOverwrites: Bool, _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = node.durable
        let count = node.unsynced.count
        guard count > 0 else { return bytes }
        let applied: Int
        var tearLast = false
        switch random.next() % 4 {
        case 0: applied = 0
        case 1: applied = count
        default:
            applied = Int.random(in: 1...count, using: &random)
            tearLast = true
        }
        for (position, (_, change)) in node.unsynced.prefix(applied).enumerated() {
            switch change {
            case .truncate(let length):
                resize(&bytes, to: length)
            case .write(let offset, var written):
                if revertOverwrites, offset + written.count <= bytes.count, random.next() % 2 == 0 { continue }
                if tearLast, position == applied - 1, written.count > 1 {
                    written = Array(written.prefix(Int.random(in: 1..<written.count, using: &random)))
                }
                apply(written, at: offset, to: &bytes)
            }
        }
        return bytes
    }

    /// The durable content plus the changes made before `cutOrder`; a write made at it is torn.
    private static func content(_ node: Inode, before cutOrder: Int, _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = node.durable
        for (order, change) in node.unsynced where order <= cutOrder {
            switch change {
            case .truncate(let length):
                if order < cutOrder { resize(&bytes, to: length) }
            case .write(let offset, let written):
                let kept = order < cutOrder ? written.count : Int.random(in: 0..<written.count, using: &random)
                if kept > 0 { apply(Array(written.prefix(kept)), at: offset, to: &bytes) }
            }
        }
        return bytes
    }

    private static func apply(_ change: NameChange, to names: inout [String: Int]) {
        switch change {
        case .link(let name, let inode): names[name] = inode
        case .unlink(let name): names[name] = nil
        case .rename(let from, let to):
            if let inode = names.removeValue(forKey: from) { names[to] = inode }
        }
    }

    private static func apply(_ written: [UInt8], at offset: Int, to bytes: inout [UInt8]) {
        if bytes.count < offset + written.count { resize(&bytes, to: offset + written.count) }
        bytes.replaceSubrange(offset..<(offset + written.count), with: written)
    }

    private static func resize(_ bytes: inout [UInt8], to length: Int) {
        if length < bytes.count {
            bytes.removeSubrange(length...)
        } else {
            bytes.append(contentsOf: repeatElement(0, count: length - bytes.count))
        }
    }

    private static func readFile(_ path: String, _ real: PosixFileSystem) throws(Errno) -> [UInt8] {
        let fd = try real.open(path, flags: O_RDONLY, mode: 0)
        defer { real.close(fd) }
        var bytes = [UInt8](repeating: 0, count: Int(try real.fileSize(fd)))
        let count = try bytes.withMutableBytes { (raw) throws(Errno) in try real.readFully(fd, into: raw, at: 0) }
        bytes.removeSubrange(count...)
        return bytes
    }

    // MARK: Counting calls

    /// The name of `path` in the store directory, or nil when it is elsewhere.
    private func name(of path: String) -> String? {
        guard path.hasPrefix(directory + "/") else { return nil }
        let name = path.dropFirst(directory.count + 1)
        return name.contains("/") || name.isEmpty ? nil : String(name)
    }

    /// Counts a call that can fail and, under the lock, runs `body` unless the power is cut.
    /// `fd` or `path` names the call in the trace.
    private func call<R>(_ operation: String, fd: Int32? = nil, path: String? = nil, _ detail: @autoclosure () -> String = "",
                         _ body: (inout State) throws(Errno) -> R) throws(Errno) -> R {
        let thread = UInt(pthread_self())
        let held = state.withLock { state -> Hold? in
            guard !state.holds.isEmpty else { return nil }
            let name = label(fd: fd, path: path, state)
            let length = state.names[name].flatMap { state.inodes[$0]?.current.count } ?? 0
            guard let position = state.holds.firstIndex(where: {
                $0.thread == thread && $0.operation == operation && $0.name == name && length > $0.longerThan
            }) else { return nil }
            return state.holds.remove(at: position).hold
        }
        held?.stop()
        return try state.withLock { (state) throws(Errno) -> R in
            let index = state.calls
            state.calls += 1
            let cut = state.cutAt.map { index >= $0 } ?? false
            if state.recordTrace || (cut && state.cutCall == nil) {
                let record = Call(index: index, operation: operation, name: label(fd: fd, path: path, state), detail: detail())
                if state.recordTrace { state.trace.append(record) }
                if cut && state.cutCall == nil { state.cutCall = record }
            }
            if cut { throw Errno.ioError }
            return try body(&state)
        }
    }

    private func label(fd: Int32?, path: String?, _ state: State) -> String {
        if let path { return name(of: path) ?? path }
        guard let fd else { return "?" }
        switch state.handles[fd] {
        case .file(_, let name)?: return name
        case .directory?: return "."
        case .untracked(let path)?: return path
        case nil: return "fd \(fd)"
        }
    }

    // MARK: FileSystem

    package func open(_ path: String, flags: Int32, mode: UInt32) throws(Errno) -> Int32 {
        try call("open", path: path) { (state) throws(Errno) -> Int32 in
            let fd = try real.open(path, flags: flags, mode: mode)
            if path == directory {
                state.handles[fd] = .directory
            } else if let name = name(of: path) {
                let inode: Int
                if let existing = state.names[name] {
                    inode = existing
                } else {
                    // A new file (O_CREAT): its name is not durable until the directory is synced.
                    inode = state.nextInode
                    state.nextInode += 1
                    state.inodes[inode] = Inode(durable: [], current: [])
                    state.names[name] = inode
                    state.unsyncedNames.append((state.takeOrder(), .link(name: name, inode: inode)))
                }
                if flags & O_TRUNC != 0, flags & (O_WRONLY | O_RDWR) != 0, !state.inodes[inode]!.current.isEmpty {
                    state.inodes[inode]!.current = []
                    state.inodes[inode]!.unsynced.append((state.takeOrder(), .truncate(length: 0)))
                }
                state.handles[fd] = .file(inode: inode, name: name)
            } else {
                state.handles[fd] = .untracked(path: path)
            }
            return fd
        }
    }

    package func close(_ fd: Int32) {
        state.withLock { state in
            state.handles[fd] = nil
            real.close(fd)
        }
    }

    package func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try call("pread", fd: fd, "@\(offset)") { (_) throws(Errno) in try real.pread(fd, into: buffer, at: offset) }
    }

    package func pwrite(_ fd: Int32, from buffer: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        try call("pwrite", fd: fd, "@\(offset) len \(buffer.count)") { (state) throws(Errno) -> Int in
            let written = try real.pwrite(fd, from: buffer, at: offset)
            if case .file(let inode, _)? = state.handles[fd], written > 0 {
                let bytes = Array(UnsafeRawBufferPointer(rebasing: buffer[0..<written]))
                Self.apply(bytes, at: Int(offset), to: &state.inodes[inode]!.current)
                state.inodes[inode]!.unsynced.append((state.takeOrder(), .write(offset: Int(offset), bytes: bytes)))
            }
            return written
        }
    }

    package func fdatasync(_ fd: Int32) throws(Errno) {
        try call("fdatasync", fd: fd) { (state) throws(Errno) in sync(fd, &state) }
    }

    package func fsync(_ fd: Int32) throws(Errno) {
        try call("fsync", fd: fd) { (state) throws(Errno) in sync(fd, &state) }
    }

    /// A sync of a file makes its content durable; of the directory, its entries.
    private func sync(_ fd: Int32, _ state: inout State) {
        switch state.handles[fd] {
        case .file(let inode, _)?:
            state.inodes[inode]!.durable = state.inodes[inode]!.current
            state.inodes[inode]!.unsynced.removeAll()
        case .directory?:
            state.durableNames = state.names
            state.unsyncedNames.removeAll()
        case .untracked?, nil:
            break
        }
    }

    package func ftruncate(_ fd: Int32, length: Int64) throws(Errno) {
        try call("ftruncate", fd: fd, "to \(length)") { (state) throws(Errno) in
            try real.ftruncate(fd, length: length)
            if case .file(let inode, _)? = state.handles[fd] {
                Self.resize(&state.inodes[inode]!.current, to: Int(length))
                state.inodes[inode]!.unsynced.append((state.takeOrder(), .truncate(length: Int(length))))
            }
        }
    }

    package func fileSize(_ fd: Int32) throws(Errno) -> Int64 {
        try call("fileSize", fd: fd) { (_) throws(Errno) in try real.fileSize(fd) }
    }

    package func rename(_ from: String, to: String) throws(Errno) {
        try call("rename", path: from, "to \(to)") { (state) throws(Errno) in
            try real.rename(from, to: to)
            guard let source = name(of: from), let target = name(of: to) else { return }
            if let inode = state.names.removeValue(forKey: source) { state.names[target] = inode }
            state.unsyncedNames.append((state.takeOrder(), .rename(from: source, to: target)))
        }
    }

    package func unlink(_ path: String) throws(Errno) {
        try call("unlink", path: path) { (state) throws(Errno) in
            try real.unlink(path)
            guard let name = name(of: path) else { return }
            state.names[name] = nil
            state.unsyncedNames.append((state.takeOrder(), .unlink(name: name)))
        }
    }

    package func makeDirectory(_ path: String, mode: UInt32) throws(Errno) {
        try call("makeDirectory", path: path) { (_) throws(Errno) in try real.makeDirectory(path, mode: mode) }
    }

    package func listDirectory(_ path: String) throws(Errno) -> [String] {
        try call("listDirectory", path: path) { (_) throws(Errno) in try real.listDirectory(path) }
    }

    package func lock(_ fd: Int32, exclusive: Bool) throws(Errno) {
        try call("lock", fd: fd) { (_) throws(Errno) in try real.lock(fd, exclusive: exclusive) }
    }

    package func isDirectory(_ path: String) -> Bool? {
        real.isDirectory(path)
    }

    package func isWritable(_ path: String) -> Bool {
        real.isWritable(path)
    }
}
