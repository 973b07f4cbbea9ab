import Cask
import Foundation
import XCTest

/// Real file manipulation for the model, torn-write, corruption, recovery and tool tests: segment
/// and hint paths, byte flips, cuts and appends, copies and snapshots of a store directory, and a
/// parse of a clean segment into its records.
package enum StoreFiles {
    /// One record of a segment file as the tests see it.
    package struct Record {
        package var offset: Int
        package var length: Int
        package var type: RecordType
        package var seq: UInt64
        package var key: [UInt8]
        /// The value of a put (decompressed), nil for a delete.
        package var value: [UInt8]?
        /// Whether the record is a member of an atomic batch.
        package var isBatchMember = false
        package var end: Int { offset + length }
    }

    package static func segmentPath(_ directory: String, _ id: UInt64) -> String { directory + "/" + SegmentName.segment(id) }
    package static func hintPath(_ directory: String, _ id: UInt64) -> String { directory + "/" + SegmentName.hint(id) }

    /// The segment ids in a store directory, ascending.
    package static func segmentIDs(in directory: String) throws -> [UInt64] {
        try FileManager.default.contentsOfDirectory(atPath: directory).compactMap(SegmentName.segmentID(fromFileName:)).sorted()
    }

    /// Copies the files of a store directory (flat) into `destination`, which must exist.
    package static func copy(from source: String, to destination: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            try write(destination + "/" + name, read(source + "/" + name))
        }
    }

    /// Deletes every hint file in a store directory.
    package static func removeHints(in directory: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name.hasSuffix(".hint") {
            try FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }

    package static func read(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    package static func write(_ path: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Makes the checksum of the record at `offset` of `bytes` right again after a test changed
    /// the record (so that the format's other rules, not the checksum, decide): the crc32c of its
    /// bytes after the first four, to `offset + length` (default: the end of `bytes`), stored
    /// little-endian in those four (FORMAT.md, "Records").
    package static func rechecksumRecord(_ bytes: inout [UInt8], at offset: Int = 0, length: Int? = nil) {
        let end = length.map { offset + $0 } ?? bytes.count
        store(CRC32C.checksum(of: bytes[(offset + 4)..<end]), in: &bytes, at: offset)
    }

    /// The same for a segment header at the start of `bytes`: the crc32c of bytes 0 ..< 36 stored
    /// at 36, or an encrypted store's (version 3), of 0 ..< 104 at 104.
    package static func rechecksumSegmentHeader(_ bytes: inout [UInt8], encrypted: Bool = false) {
        let covered = encrypted ? 104 : 36
        store(CRC32C.checksum(of: bytes[0..<covered]), in: &bytes, at: covered)
    }

    private static func store(_ crc: UInt32, in bytes: inout [UInt8], at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
    }

    /// Every file of a directory with its bytes (to prove that nothing changed).
    package static func snapshot(_ directory: String) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) { files[name] = try read(directory + "/" + name) }
        return files
    }

    /// XORs one byte of a file in place, through a file handle.
    package static func flip(_ path: String, at offset: Int, mask: UInt8 = 0xFF) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        guard let byte = try handle.read(upToCount: 1)?.first else { throw CocoaError(.fileReadUnknown) }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: [byte ^ mask])
    }

    package static func truncate(_ path: String, to length: Int) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(length))
    }

    package static func append(_ path: String, _ bytes: [UInt8]) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes)
    }

    package static func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? -1
    }

    /// Parses a clean segment file record by record (failing the test at the first invalid byte).
    package static func records(ofSegment path: String, file: StaticString = #filePath, line: UInt = #line) throws -> [Record] {
        let bytes = try read(path)
        var records: [Record] = []
        guard case .success(let (segmentHeader, _)) = bytes.withUnsafeBytes({ SegmentHeader.decode($0, encryption: nil) }) else {
            XCTFail("\(path): no valid segment header", file: file, line: line)
            return []
        }
        let keyPrefix = segmentHeader.keyPrefix
        var offset = segmentHeader.byteCount
        // Zero bytes to the end of the file are space a writer reserved (FORMAT.md, "Reserved space").
        while offset < bytes.count && !bytes[offset...].allSatisfy({ $0 == 0 }) {
            let result = bytes.withUnsafeBytes { RecordHeader.validate(UnsafeRawBufferPointer(rebasing: $0[offset...]), keyPrefixLength: keyPrefix.count) }
            guard case .success(let header) = result else {
                XCTFail("\(path): no valid record at \(offset): \(result)", file: file, line: line)
                break
            }
            let record = Array(bytes[offset..<(offset + header.recordLength)])
            let key = record.withUnsafeBytes { record in keyPrefix.withUnsafeBytes { header.key(in: record, prefix: $0) } }
            var value: [UInt8]?
            if header.type == .put {
                let payload = Array(record[header.payloadRange])
                if header.isCompressed {
                    var out = [UInt8](repeating: 0, count: header.valueLength)
                    let ok = payload.withUnsafeBytes { source in out.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0) } }
                    XCTAssertTrue(ok, "lz4 payload at \(offset)", file: file, line: line)
                    value = out
                } else {
                    value = payload
                }
            }
            records.append(Record(
                offset: offset, length: header.recordLength, type: header.type, seq: header.seq, key: key, value: value,
                isBatchMember: header.flags & RecordFlags.batchMember != 0))
            offset += header.recordLength
        }
        return records
    }

    /// The contents a set of records describes: newest seq per key wins, deletes remove.
    package static func replay(_ records: [Record]) -> [[UInt8]: [UInt8]] {
        var newest: [[UInt8]: Record] = [:]
        for record in records where (newest[record.key]?.seq ?? 0) < record.seq || newest[record.key] == nil {
            newest[record.key] = record
        }
        return newest.compactMapValues(\.value)
    }
}
