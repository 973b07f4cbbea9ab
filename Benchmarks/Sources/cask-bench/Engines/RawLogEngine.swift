import Foundation

/// A reference, not a store: every put appends `[u32 key length][u32 value length][key][value]`
/// to one file with one `pwrite` (and in `sync` mode one `fdatasync`). No index, no reads. It is
/// the floor a log that hands every write to the OS can reach on this machine — the issue's
/// "one write() per record" and "one fdatasync per op" figures, measured in the same run.
final class RawLogEngine: Engine, @unchecked Sendable {  // Safe: used by one thread only (no `.threads`).
    static let name = "rawlog"
    static let capabilities: Capabilities = []

    static func describe(_ mode: WriteMode) -> String {
        switch mode {
        case .nosync: "reference: one `pwrite` per record appended to one file, nothing else"
        case .batch1000: "not run"
        case .sync: "reference: one `pwrite` + one `fdatasync` per record"
        }
    }

    private let path: String
    private let mode: WriteMode
    private let fd: Int32
    private var offset: Int64 = 0
    private var record: UnsafeMutableRawBufferPointer

    init(directory: String, mode: WriteMode) throws {
        try makeDirectory(directory)
        path = directory + "/raw.log"
        self.mode = mode
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        record = .allocate(byteCount: 4096, alignment: 16)
        guard fd >= 0 else { throw BenchError.engine(Self.name, "open \(path)", errnoText()) }
    }

    deinit { record.deallocate() }

    func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        let length = 8 + key.count + value.count
        if length > record.count {
            record.deallocate()
            record = .allocate(byteCount: length, alignment: 16)
        }
        record.storeBytes(of: UInt32(key.count).littleEndian, toByteOffset: 0, as: UInt32.self)
        record.storeBytes(of: UInt32(value.count).littleEndian, toByteOffset: 4, as: UInt32.self)
        UnsafeMutableRawBufferPointer(rebasing: record[8..<(8 + key.count)]).copyMemory(from: key)
        UnsafeMutableRawBufferPointer(rebasing: record[(8 + key.count)..<length]).copyMemory(from: value)
        var done = 0
        while done < length {
            let n = pwrite(fd, record.baseAddress! + done, length - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw BenchError.engine(Self.name, "pwrite \(path)", errnoText()) }
            done += n
        }
        offset += Int64(length)
        if mode == .sync && fdatasync(fd) != 0 { throw BenchError.engine(Self.name, "fdatasync \(path)", errnoText()) }
    }

    func commitBatch() throws {}

    func close() throws { _ = Glibc.close(fd) }
}
