/// Reads a segment file front to back, validating every record, and resynchronises past damage.
///
/// Used by recovery, by hint generation and by `verify`. Reads through a 1 MiB window; a record is
/// reported only after its lengths are checked against ``Limits`` and its checksum matches. After
/// an invalid record the scanner tries every following byte offset until a valid record starts
/// there (or the file ends) and reports the skipped bytes as one corrupt range.
package struct SegmentScanner: ~Copyable {
    package struct CorruptRange: Equatable {
        package var offset: Int64
        package var length: Int64
        package var reason: String
    }

    private let fd: Int32
    private let path: String
    private let fileSystem: any FileSystem
    /// The file's length: as given, or where the file turned out to end, when it shrank while it
    /// was scanned (a writer gave its reserved space back, see ``isReservedSpace(fd:path:from:to:fileSystem:)``).
    package private(set) var fileLength: Int64
    private var window = ByteBuffer(capacity: 1 << 20)
    private var windowStart: Int64 = 0
    private static let windowSize = 1 << 20

    package init(fd: Int32, path: String, fileLength: Int64, fileSystem: any FileSystem) {
        self.fd = fd
        self.path = path
        self.fileLength = fileLength
        self.fileSystem = fileSystem
    }

    /// Scans from `start` to the end of the file. `onRecord` gets each valid record's offset,
    /// header and bytes (valid only during the call); `onCorrupt` gets each skipped range.
    /// Returns the offset just past the last valid record (or `start`).
    package mutating func scan(
        from start: Int64,
        onRecord: (Int64, RecordHeader, UnsafeRawBufferPointer) -> Void,
        onCorrupt: (CorruptRange) -> Void
    ) throws(CaskError) -> Int64 {
        var position = start
        var validEnd = start
        while position < fileLength {
            switch try record(at: position) {
            case .success(let (header, bytes)):
                onRecord(position, header, bytes)
                position += Int64(header.recordLength)
                validEnd = position
            case .failure(let problem):
                var next = position + 1
                while next < fileLength {
                    if case .success = try record(at: next) { break }
                    next += 1
                }
                onCorrupt(CorruptRange(offset: position, length: next - position, reason: problem.description))
                position = next
            }
        }
        return validEnd
    }

    /// Whether bytes `start ..< end` of the file, which run to its end, are space a writer
    /// reserved ahead of its writes (FORMAT.md, "Reserved space"): at most
    /// ``StoreWriter/maxReservedSpace`` bytes, all zero (up to where the file ends, if it shrank
    /// meanwhile). Reads them in 64 KiB pieces.
    package static func isReservedSpace(
        fd: Int32, path: String, from start: Int64, to end: Int64, fileSystem: any FileSystem
    ) throws(CaskError) -> Bool {
        // More zeros than a writer ever reserves ahead are lost records (a power cut), not space.
        guard end - start <= StoreWriter.maxReservedSpace else { return false }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var position = start
        while position < end {
            let count = Int(min(Int64(buffer.count), end - position))
            var failure: Errno?
            let read = buffer.withUnsafeMutableBytes { raw in
                do throws(Errno) {
                    return try fileSystem.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]), at: position)
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw CaskError.io(operation: "pread", path: path, errno: failure) }
            guard buffer[0..<read].allSatisfy({ $0 == 0 }) else { return false }
            // A short read: the file ends sooner (its writer gave the space back meanwhile).
            if read < count { return true }
            position += Int64(count)
        }
        return true
    }

    /// The valid record at `offset`, or why there is none.
    private mutating func record(at offset: Int64) throws(CaskError) -> Result<(RecordHeader, UnsafeRawBufferPointer), RecordHeader.Problem> {
        let headerView = try view(at: offset, count: Limits.maxRecordHeaderLength)
        let header: RecordHeader
        switch RecordHeader.parse(headerView) {
        case .success(let parsed): header = parsed
        case .failure(let problem): return .failure(problem)
        }
        guard Int64(header.recordLength) <= fileLength - offset else {
            return .failure(.truncated(needed: header.recordLength))
        }
        let bytes = try view(at: offset, count: header.recordLength)
        switch RecordHeader.validate(bytes) {
        case .success(let validated): return .success((validated, bytes))
        case .failure(let problem): return .failure(problem)
        }
    }

    /// Up to `count` bytes at `offset` (fewer only at end of file), valid until the next call.
    private mutating func view(at offset: Int64, count: Int) throws(CaskError) -> UnsafeRawBufferPointer {
        let available = Int(min(Int64(count), fileLength - offset))
        if offset < windowStart || offset + Int64(available) > windowStart + Int64(window.count) {
            let length = Int(min(Int64(max(count, Self.windowSize)), fileLength - offset))
            window.count = 0
            window.reserve(length)
            let read: Int
            do {
                read = try window.withUnsafeMutableCapacity { (space) throws(Errno) in
                    try fileSystem.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: space[0..<length]), at: offset)
                }
            } catch {
                throw CaskError.io(operation: "pread", path: path, errno: error)
            }
            window.count = read
            windowStart = offset
            if read < length {
                // The file shrank since its length was taken: a writer that has the store open gave
                // back the space it had reserved (a read-only scan of a live store). It ends here.
                fileLength = offset + Int64(read)
                return window.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[0..<min(read, count)]) }
            }
        }
        let start = Int(offset - windowStart)
        return window.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[start..<(start + available)]) }
    }
}
