import Foundation

/// The "file per object" approach many apps start with: one file per key (its name the key in
/// hex, in 256 subdirectories by a hash of the key), replaced atomically by writing a temporary
/// file and `rename`-ing it over the old one. No batches: it does not run in `batch1000`.
final class FilePerObjectEngine: Engine, @unchecked Sendable {  // Safe: a handle is used by one thread; each has its own temporary names and buffer.
    static let name = "files"
    static let capabilities: Capabilities = [.reads, .deletes, .scans, .threads, .reopen]
    /// ~100 µs per put (a create, a write and a rename): a tenth of the entries keeps the full suite in minutes.
    static let divisor = 10

    static func describe(_ mode: WriteMode) -> String {
        switch mode {
        case .nosync: "one file per key: `open`+`write`+`close` a temporary file, `rename` it over the key's file"
        case .batch1000: "not run (a file system has no batches)"
        case .sync: "as nosync, plus `fdatasync` of the file before the `rename` and `fsync` of the directory after"
        }
    }

    private static let shards = 256
    private let directory: String
    private let mode: WriteMode
    /// Distinguishes this handle's temporary files from other threads' handles.
    private let handleID: Int
    private var handles = 0
    private var buffer: UnsafeMutableRawBufferPointer
    /// The shard directories, open for the directory `fsync` of `sync` mode.
    private let shardDescriptors: [Int32]
    private let ownsDescriptors: Bool

    init(directory: String, mode: WriteMode) throws {
        self.directory = directory
        self.mode = mode
        handleID = 0
        buffer = .allocate(byteCount: 4096, alignment: 16)
        var descriptors: [Int32] = []
        for shard in 0..<Self.shards {
            let path = directory + "/" + Self.hex(UInt8(shard))
            try makeDirectory(path)
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw BenchError.engine(Self.name, "open \(path)", errnoText()) }
            descriptors.append(fd)
        }
        shardDescriptors = descriptors
        ownsDescriptors = true
    }

    private init(sharing other: FilePerObjectEngine, handleID: Int) {
        directory = other.directory
        mode = other.mode
        self.handleID = handleID
        buffer = .allocate(byteCount: 4096, alignment: 16)
        shardDescriptors = other.shardDescriptors
        ownsDescriptors = false
    }

    deinit { buffer.deallocate() }

    private static let digits = Array("0123456789abcdef".utf8)

    private static func hex(_ byte: UInt8) -> String {
        String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
    }

    /// The shard (FNV-1a of the key, low byte) and the key's file path.
    private func location(_ key: UnsafeRawBufferPointer) -> (shard: Int, path: String) {
        var hash: UInt32 = 2_166_136_261
        for byte in key { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let shard = Int(hash & 0xFF)
        var name = [UInt8]()
        name.reserveCapacity(key.count * 2)
        for byte in key {
            name.append(Self.digits[Int(byte >> 4)])
            name.append(Self.digits[Int(byte & 15)])
        }
        return (shard, directory + "/" + Self.hex(UInt8(shard)) + "/" + String(decoding: name, as: UTF8.self))
    }

    private func fail(_ operation: String, _ path: String) -> BenchError {
        BenchError.engine(Self.name, "\(operation) \(path)", errnoText())
    }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        let (shard, path) = location(key)
        let temporary = path + ".tmp\(handleID)"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw fail("open", temporary) }
        var written = 0
        while written < value.count {
            let n = write(fd, value.baseAddress! + written, value.count - written)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { Glibc.close(fd); throw fail("write", temporary) }
            written += n
        }
        if mode == .sync && fdatasync(fd) != 0 { Glibc.close(fd); throw fail("fdatasync", temporary) }
        guard Glibc.close(fd) == 0 else { throw fail("close", temporary) }
        guard rename(temporary, path) == 0 else { throw fail("rename", temporary) }
        if mode == .sync && fsync(shardDescriptors[shard]) != 0 { throw fail("fsync directory of", path) }
    }

    func delete(_ key: UnsafeRawBufferPointer) throws {
        let (shard, path) = location(key)
        if unlink(path) != 0 {
            if errno == ENOENT { return }
            throw fail("unlink", path)
        }
        if mode == .sync && fsync(shardDescriptors[shard]) != 0 { throw fail("fsync directory of", path) }
    }

    func commitBatch() throws {}

    func get<R>(_ key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        let path = location(key).path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw fail("open", path)
        }
        defer { Glibc.close(fd) }
        return try body(try readAll(fd, path))
    }

    /// The whole file, into this handle's buffer (grown as needed).
    private func readAll(_ fd: Int32, _ path: String) throws -> UnsafeRawBufferPointer {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw fail("fstat", path) }
        let size = Int(info.st_size)
        if size > buffer.count {
            buffer.deallocate()
            buffer = .allocate(byteCount: size, alignment: 16)
        }
        var done = 0
        while done < size {
            let n = read(fd, buffer.baseAddress! + done, size - done)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw fail("read", path) }
            done += n
        }
        return UnsafeRawBufferPointer(rebasing: buffer[0..<size])
    }

    /// Every file in directory order (keys are not decoded back from hex: the visit gets the name).
    func scan(_ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws -> Int {
        var count = 0
        for shard in 0..<Self.shards {
            let shardPath = directory + "/" + Self.hex(UInt8(shard))
            for name in try FileManager.default.contentsOfDirectory(atPath: shardPath) where !name.contains(".tmp") {
                let path = shardPath + "/" + name
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw fail("open", path) }
                defer { Glibc.close(fd) }
                let value = try readAll(fd, path)
                Array(name.utf8).withUnsafeBytes { visit($0, value) }
                count += 1
            }
        }
        return count
    }

    func handleForAnotherThread() throws -> any Engine {
        handles += 1
        return FilePerObjectEngine(sharing: self, handleID: handles)
    }

    func close() throws {
        if ownsDescriptors { for fd in shardDescriptors { _ = Glibc.close(fd) } }
    }
}
