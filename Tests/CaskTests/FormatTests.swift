import XCTest
@testable import Cask
import CaskTestSupport

/// Unit tests of the on-disk format: checksums, varints, records, segment headers, hint files.
final class FormatTests: XCTestCase {
    // MARK: CRC-32C

    func testCRC32CKnownVectors() {
        XCTAssertEqual(CRC32C.checksum(of: Array("123456789".utf8)), 0xE306_9283)
        XCTAssertEqual(CRC32C.checksum(of: [UInt8](repeating: 0, count: 32)), 0x8A91_36AA)
        XCTAssertEqual(CRC32C.checksum(of: [UInt8](repeating: 0xFF, count: 32)), 0x62A8_AB43)
        XCTAssertEqual(CRC32C.checksum(of: (0..<32).map { UInt8($0) }), 0x46DD_794E)
        XCTAssertEqual(CRC32C.checksum(of: (0..<32).map { UInt8(31 - $0) }), 0x113F_DB5C)
        XCTAssertEqual(CRC32C.checksum(of: [UInt8]()), 0)
        XCTAssertEqual(CRC32C.checksum(of: Array("a".utf8)), 0xC1D0_4330)
    }

    /// The CPU's instruction (used where there is one) and the tables give the same checksums,
    /// at every length around the 8-byte steps and every alignment, from any starting value.
    func testCRC32CHardwareAgreesWithTables() throws {
        let vectors: [([UInt8], UInt32)] = [
            (Array("123456789".utf8), 0xE306_9283), ([UInt8](repeating: 0, count: 32), 0x8A91_36AA),
            ([UInt8](repeating: 0xFF, count: 32), 0x62A8_AB43), ((0..<32).map { UInt8($0) }, 0x46DD_794E),
        ]
        for (bytes, expected) in vectors {
            bytes.withUnsafeBytes { XCTAssertEqual(CRC32C.softwareChecksum(of: $0), expected) }
        }
        guard CRC32C.hardwareChecksum(of: UnsafeRawBufferPointer(start: nil, count: 0)) != nil else {
            XCTAssertFalse(CRC32C.usesHardware)
            throw XCTSkip("this CPU has no CRC-32C instruction; the tables are used")
        }
        XCTAssertTrue(CRC32C.usesHardware)
        for (bytes, expected) in vectors {
            bytes.withUnsafeBytes { XCTAssertEqual(CRC32C.hardwareChecksum(of: $0), expected) }
        }
        var rng = SeededGenerator(seed: 0xC2C2)
        let bytes = rng.bytes(4096 + 8)
        bytes.withUnsafeBytes { raw in
            for length in Array(0...80) + [127, 128, 129, 1000, 4096] {
                for alignment in 0..<8 {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[alignment..<(alignment + length)])
                    let start = UInt32(truncatingIfNeeded: length &* 2_654_435_761)
                    XCTAssertEqual(CRC32C.hardwareChecksum(of: slice, continuing: start),
                                   CRC32C.softwareChecksum(of: slice, continuing: start),
                                   "length \(length), alignment \(alignment)")
                }
            }
        }
    }

    func testCRC32CChunkedEqualsWhole() {
        var rng = SeededGenerator(seed: 0xC2C)
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4099] {
            let bytes = rng.bytes(length)
            let whole = CRC32C.checksum(of: bytes)
            // Every split point, and a random multi-way split.
            for split in 0...length {
                let crc = bytes.withUnsafeBytes { raw in
                    let first = CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: raw[0..<split]))
                    return CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: raw[split...]), continuing: first)
                }
                XCTAssertEqual(crc, whole, "length \(length) split \(split)")
            }
            var crc: UInt32 = 0
            var start = 0
            while start < length {
                let end = min(length, start + Int.random(in: 1...13, using: &rng))
                crc = bytes.withUnsafeBytes { CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: $0[start..<end]), continuing: crc) }
                start = end
            }
            XCTAssertEqual(crc, whole, "length \(length) random chunks")
        }
    }

    func testCRC32CUnalignedInput() {
        var rng = SeededGenerator(seed: 77)
        let bytes = rng.bytes(200)
        let expected = CRC32C.checksum(of: Array(bytes[3..<150]))
        bytes.withUnsafeBytes { raw in
            XCTAssertEqual(CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: raw[3..<150])), expected)
        }
    }

    // MARK: Varints

    private func encodeVarint(_ value: UInt64) -> [UInt8] {
        var buffer = ByteBuffer(capacity: 16)
        buffer.append(varint: value)
        return buffer.copyBytes()
    }

    private func readVarint(_ bytes: [UInt8], at start: Int = 0) -> (UInt64, Int)? {
        bytes.withUnsafeBytes { raw in
            var offset = start
            guard let value = Varint.read(raw, at: &offset) else {
                XCTAssertEqual(offset, start, "a failed read must not move the offset")
                return nil
            }
            return (value, offset)
        }
    }

    func testVarintRoundTripsAtBoundaries() {
        var values: [UInt64] = [0, 1, 2, .max, .max - 1, 1 << 63, (1 << 63) - 1]
        for bits in stride(from: 7, through: 63, by: 7) {
            let edge = UInt64(1) << UInt64(bits)
            values += [edge - 1, edge, edge + 1]
        }
        for value in values {
            let bytes = encodeVarint(value)
            XCTAssertEqual(bytes.count, Varint.size(of: value), "size of \(value)")
            var expectedSize = 1
            var rest = value >> 7
            while rest > 0 { expectedSize += 1; rest >>= 7 }
            XCTAssertEqual(bytes.count, expectedSize, "encoded size of \(value)")
            XCTAssertTrue(bytes.dropLast().allSatisfy { $0 & 0x80 != 0 } && bytes.last! & 0x80 == 0, "continuation bits of \(value)")
            guard let (decoded, end) = readVarint(bytes) else { XCTFail("cannot read back \(value)"); continue }
            XCTAssertEqual(decoded, value)
            XCTAssertEqual(end, bytes.count)
            // Embedded between other bytes, read at an offset.
            let embedded = [0xAA, 0xBB] + bytes + [0xCC]
            guard let (again, endAgain) = readVarint(embedded, at: 2) else { XCTFail("embedded \(value)"); continue }
            XCTAssertEqual(again, value)
            XCTAssertEqual(endAgain, 2 + bytes.count)
        }
        XCTAssertEqual(encodeVarint(.max), [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        XCTAssertEqual(encodeVarint(300), [0xAC, 0x02])
    }

    func testVarintRandomRoundTrips() {
        var rng = SeededGenerator(seed: 99)
        for _ in 0..<5000 {
            let value = rng.next() >> UInt64.random(in: 0...63, using: &rng)
            let bytes = encodeVarint(value)
            XCTAssertEqual(readVarint(bytes)?.0, value)
            XCTAssertEqual(readVarint(bytes)?.1, bytes.count)
        }
    }

    func testVarintRejectsMalformedInput() {
        // 11 bytes: ten continuation bytes, then a terminator.
        XCTAssertNil(readVarint([UInt8](repeating: 0x80, count: 10) + [0x00]))
        XCTAssertNil(readVarint([UInt8](repeating: 0xFF, count: 10) + [0x01]))
        // Ten bytes whose last still has the continuation bit.
        XCTAssertNil(readVarint([UInt8](repeating: 0x80, count: 10)))
        // Overflow: the tenth byte may only carry one bit (bit 63).
        XCTAssertNil(readVarint([UInt8](repeating: 0xFF, count: 9) + [0x02]))
        XCTAssertNil(readVarint([UInt8](repeating: 0x80, count: 9) + [0x7F]))
        XCTAssertEqual(readVarint([UInt8](repeating: 0x80, count: 9) + [0x01])?.0, 1 << 63)
        // Truncated: runs off the end.
        XCTAssertNil(readVarint([]))
        XCTAssertNil(readVarint([0x80]))
        XCTAssertNil(readVarint([0xFF, 0xFF, 0xFF]))
        XCTAssertNil(readVarint(Array(encodeVarint(.max).dropLast())))
        XCTAssertNil(readVarint([0x01, 0x80], at: 1))
        XCTAssertNil(readVarint([0x01], at: 1))
    }

    // MARK: Records

    private func encodeRecord(
        _ type: RecordType, seq: UInt64, key: [UInt8], value: [UInt8], expiresAt: UInt64? = nil, encoder: RecordEncoder = RecordEncoder()
    ) -> [UInt8] {
        var buffer = ByteBuffer(capacity: 64)
        let length = key.withUnsafeBytes { key in
            value.withUnsafeBytes { value in
                encoder.append(type: type, seq: seq, key: key, value: value, expiresAt: expiresAt, to: &buffer)
            }
        }
        let bytes = buffer.copyBytes()
        XCTAssertEqual(length, bytes.count)
        return bytes
    }

    /// `RecordHeader.validate`, checked on every call against the form the read path uses (not
    /// explaining): it must accept exactly the same bytes, with the same header.
    private func validate(
        _ bytes: [UInt8], keyPrefixLength: Int = 0, file: StaticString = #filePath, line: UInt = #line
    ) -> Result<RecordHeader, RecordHeader.Problem> {
        let result = bytes.withUnsafeBytes { RecordHeader.validate($0, keyPrefixLength: keyPrefixLength) }
        var problem: RecordHeader.Problem?
        let quick = bytes.withUnsafeBytes { RecordHeader.validate($0, keyPrefixLength: keyPrefixLength, explaining: false, problem: &problem) }
        XCTAssertEqual(quick, try? result.get(), "validate, not explaining", file: file, line: line)
        XCTAssertNil(problem, "validate, not explaining, gave a reason", file: file, line: line)
        return result
    }

    /// `RecordHeader.parse`, checked against its form that does not explain the same way.
    private func parse(
        _ bytes: [UInt8], keyPrefixLength: Int = 0, file: StaticString = #filePath, line: UInt = #line
    ) -> Result<RecordHeader, RecordHeader.Problem> {
        let result = bytes.withUnsafeBytes { RecordHeader.parse($0, keyPrefixLength: keyPrefixLength) }
        var problem: RecordHeader.Problem?
        let quick = bytes.withUnsafeBytes { RecordHeader.parse($0, keyPrefixLength: keyPrefixLength, explaining: false, problem: &problem) }
        XCTAssertEqual(quick, try? result.get(), "parse, not explaining", file: file, line: line)
        XCTAssertNil(problem, "parse, not explaining, gave a reason", file: file, line: line)
        return result
    }

    /// Key comparison (in line for 8 to 16 bytes, `memcmp` otherwise) against array equality, for
    /// every length up to 40 and a difference at every position.
    func testSameBytesAgreesWithArrayEquality() {
        var rng = SeededGenerator(seed: 0x5B)
        for length in 0...40 {
            let a = rng.bytes(length)
            a.withUnsafeBytes { x in a.withUnsafeBytes { y in XCTAssertTrue(x.hasSameBytes(as: y), "length \(length)") } }
            // Equal bytes at another address, and unaligned.
            let b = [0] + a
            b.withUnsafeBytes { y in a.withUnsafeBytes { x in XCTAssertTrue(x.hasSameBytes(as: UnsafeRawBufferPointer(rebasing: y[1...]))) } }
            for position in 0..<length {
                var c = a
                c[position] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
                a.withUnsafeBytes { x in c.withUnsafeBytes { y in XCTAssertFalse(x.hasSameBytes(as: y), "length \(length), byte \(position)") } }
            }
            let longer = a + [0]
            a.withUnsafeBytes { x in longer.withUnsafeBytes { y in XCTAssertFalse(x.hasSameBytes(as: y)) } }
        }
    }

    /// The quick checks (no reasons, for the read path) against the full ones on damaged records:
    /// bytes changed at random in the header, lengths cut, type and flag bytes set to anything.
    func testQuickChecksRejectExactlyWhatTheFullChecksReject() {
        var rng = SeededGenerator.fromEnvironment(fallback: 0x9C4)
        let encoder = RecordEncoder()
        var accepted = 0
        for round in 0..<20_000 {
            let compressible = Bool.random(using: &rng)
            let value = compressible ? [UInt8](repeating: 7, count: Int.random(in: 0..<300, using: &rng)) : rng.bytes(Int.random(in: 0..<300, using: &rng))
            let type: RecordType = Int.random(in: 0..<10, using: &rng) == 0 ? .delete : .put
            var record = encodeRecord(
                type, seq: UInt64.random(in: 1...Limits.maxSeq, using: &rng), key: rng.bytes(Int.random(in: 1...40, using: &rng)),
                value: type == .put ? value : [], expiresAt: type == .put && Bool.random(using: &rng) ? UInt64.random(in: 0...UInt64.max, using: &rng) : nil,
                encoder: encoder)
            switch round % 4 {
            case 0: break
            case 1: record[Int.random(in: 4..<min(record.count, 24), using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            case 2: record[Int.random(in: 4...5, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            default: record.removeLast(Int.random(in: 0...record.count, using: &rng))
            }
            // Checksum fixed up half the time, so that the header rules, not the checksum, decide.
            if Bool.random(using: &rng), record.count >= 4 {
                StoreFiles.rechecksumRecord(&record)
            }
            if case .success = validate(record) { accepted += 1 }
            _ = parse(record)
        }
        // Both outcomes were exercised.
        XCTAssertGreaterThan(accepted, 2_000)
        XCTAssertLessThan(accepted, 18_000)
    }

    /// Decodes the value of a validated record the way the store does (decompressing when flagged).
    private func decodedValue(of bytes: [UInt8], _ header: RecordHeader) -> [UInt8]? {
        let start = header.headerLength + header.keyLength
        let payload = Array(bytes[start..<(start + header.storedLength)])
        guard header.isCompressed else { return payload }
        var out = [UInt8](repeating: 0, count: header.valueLength)
        let ok = payload.withUnsafeBytes { source in out.withUnsafeMutableBytes { LZ4Decompressor.decompress(source, into: $0) } }
        // The read path's expander must give the same bytes.
        var expanded = [UInt8](repeating: 0, count: header.valueLength)
        let expandedOK = payload.withUnsafeBytes { source in expanded.withUnsafeMutableBytes { LZ4BlockExpander.expand(source, into: $0) } }
        XCTAssertEqual(expandedOK, ok)
        if ok { XCTAssertEqual(expanded, out) }
        return ok ? out : nil
    }

    private func assertRoundTrip(
        _ type: RecordType, seq: UInt64, key: [UInt8], value: [UInt8], expiresAt: UInt64? = nil, compressed: Bool,
        encoder: RecordEncoder = RecordEncoder(), file: StaticString = #filePath, line: UInt = #line
    ) {
        let bytes = encodeRecord(type, seq: seq, key: key, value: value, expiresAt: expiresAt, encoder: encoder)
        guard case .success(let header) = validate(bytes) else {
            return XCTFail("record does not validate: \(validate(bytes))", file: file, line: line)
        }
        XCTAssertEqual(parse(bytes), .success(header), file: file, line: line)
        XCTAssertEqual(header.type, type, file: file, line: line)
        XCTAssertEqual(header.seq, seq, file: file, line: line)
        XCTAssertEqual(header.keyLength, key.count, file: file, line: line)
        XCTAssertEqual(header.valueLength, value.count, file: file, line: line)
        XCTAssertEqual(header.expiresAt, expiresAt, file: file, line: line)
        XCTAssertEqual(header.flags & RecordFlags.expires != 0, expiresAt != nil, file: file, line: line)
        XCTAssertEqual(header.isCompressed, compressed, "lz4 flag", file: file, line: line)
        XCTAssertEqual(header.recordLength, bytes.count, file: file, line: line)
        if compressed {
            XCTAssertLessThanOrEqual(header.storedLength, value.count - value.count / 8, "must save 1/8", file: file, line: line)
        } else {
            XCTAssertEqual(header.storedLength, value.count, file: file, line: line)
        }
        XCTAssertEqual(Array(bytes[header.headerLength..<(header.headerLength + key.count)]), key, file: file, line: line)
        XCTAssertEqual(decodedValue(of: bytes, header), value, file: file, line: line)
        // The checksum covers everything after itself.
        let stored = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
        XCTAssertEqual(stored, CRC32C.checksum(of: bytes[4...]), file: file, line: line)
        // Extra bytes after the record do not matter.
        guard case .success(let again) = validate(bytes + [1, 2, 3]) else { return XCTFail("with trailing bytes", file: file, line: line) }
        XCTAssertEqual(again, header, file: file, line: line)
    }

    func testRecordRoundTrips() {
        var rng = SeededGenerator(seed: 5)
        let compressible = Array(repeating: Array("hello cask ".utf8), count: 10).flatMap { $0 }.prefix(100).map { $0 }
        XCTAssertEqual(compressible.count, 100)
        let random100 = rng.bytes(100)
        assertRoundTrip(.put, seq: 1, key: Array("k".utf8), value: compressible, compressed: true)
        assertRoundTrip(.put, seq: 2, key: Array("key".utf8), value: Array(compressible.prefix(20)), compressed: false)
        assertRoundTrip(.put, seq: 3, key: Array("zeros".utf8), value: [UInt8](repeating: 0, count: 20), compressed: false)
        assertRoundTrip(.put, seq: 4, key: Array("random".utf8), value: random100, compressed: false)
        assertRoundTrip(.put, seq: 5, key: Array("empty".utf8), value: [], compressed: false)
        assertRoundTrip(.delete, seq: 6, key: Array("gone".utf8), value: [], compressed: false)
        assertRoundTrip(.put, seq: 7, key: Array("exp".utf8), value: compressible, expiresAt: 1_700_000_000_123, compressed: true)
        assertRoundTrip(.put, seq: 8, key: Array("exp-raw".utf8), value: [9, 9, 9], expiresAt: .max, compressed: false)
        assertRoundTrip(.put, seq: Limits.maxSeq, key: [UInt8](repeating: 0x5A, count: Limits.maxKeyLength), value: [1], compressed: false)
        // Out of the format's range: a delete with an expiry, seq 0, seq 2^63 (so "next" never overflows).
        for (type, seq, expiresAt) in [(RecordType.delete, UInt64(9), UInt64?(0)), (.put, 0, nil), (.put, Limits.maxSeq + 1, nil), (.put, .max, nil)] {
            let record = encodeRecord(type, seq: seq, key: Array("bad".utf8), value: [], expiresAt: expiresAt)
            guard case .failure(.malformed) = validate(record) else { return XCTFail("accepted \(type) seq \(seq) expiry \(String(describing: expiresAt))") }
        }
        assertRoundTrip(.put, seq: 1 << 40, key: [0], value: [UInt8](repeating: 3, count: 1 << 20), compressed: true)
        assertRoundTrip(.put, seq: 11, key: [1], value: rng.bytes(70_000), compressed: false)
        // One encoder reused across many records (its scratch buffer must not leak between them).
        let encoder = RecordEncoder()
        for seq in 1...300 {
            let length = Int.random(in: 0..<600, using: &rng)
            let compress = Bool.random(using: &rng)
            let value = compress ? [UInt8](repeating: UInt8(seq & 0xFF), count: max(length, 64)) : rng.bytes(length)
            assertRoundTrip(
                .put, seq: UInt64(seq), key: rng.bytes(Int.random(in: 1...40, using: &rng)), value: value,
                compressed: compress, encoder: encoder)
        }
    }

    func testEveryByteFlipOfARecordIsRejected() {
        var rng = SeededGenerator(seed: 17)
        let records = [
            encodeRecord(.put, seq: 300, key: Array("flip-me".utf8), value: rng.bytes(40)),
            encodeRecord(.put, seq: 123_456_789, key: Array("compressed".utf8), value: [UInt8](repeating: 0x41, count: 100)),
            encodeRecord(.delete, seq: 9, key: Array("deleted".utf8), value: []),
            encodeRecord(.put, seq: 1, key: Array("expiring".utf8), value: Array("v".utf8), expiresAt: 1_800_000_000_000),
        ]
        for record in records {
            XCTAssertNotNil(try? validate(record).get())
            for index in record.indices {
                for mask: UInt8 in [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF] {
                    var damaged = record
                    damaged[index] ^= mask
                    if case .success(let header) = validate(damaged) {
                        XCTFail("flip 0x\(String(mask, radix: 16)) at byte \(index) of a \(record.count)-byte record validates: \(header)")
                    }
                }
            }
            // Every proper prefix is reported as cut short (or malformed), never valid.
            for length in 0..<record.count {
                switch validate(Array(record.prefix(length))) {
                case .success: XCTFail("prefix of \(length) bytes validates")
                case .failure(.truncated(let needed)): XCTAssertGreaterThan(needed, length)
                case .failure(let problem): XCTFail("prefix of \(length) bytes: \(problem), expected truncated")
                }
            }
        }
    }

    /// A record header with arbitrary fields (checksum zero): what a corrupt disk could hold.
    private func rawHeader(type: UInt8 = 1, flags: UInt8 = 0, seq: UInt64 = 1, keyLength: UInt64, valueLength: UInt64, storedLength: UInt64? = nil) -> [UInt8] {
        var bytes: [UInt8] = [0, 0, 0, 0, type, flags]
        bytes += encodeVarint(seq) + encodeVarint(keyLength) + encodeVarint(valueLength)
        if let storedLength { bytes += encodeVarint(storedLength) }
        return bytes
    }

    func testLengthsOverTheLimitsAreRejectedFromTheHeaderAlone() {
        // Only the header bytes are present: the verdict must come before anything of that size is read.
        func assertMalformed(_ bytes: [UInt8], _ what: String, line: UInt = #line) {
            switch parse(bytes) {
            case .failure(.malformed): break
            default: XCTFail("\(what): \(parse(bytes))", line: line)
            }
            switch validate(bytes) {
            case .failure(.malformed): break
            default: XCTFail("\(what) (validate): \(validate(bytes))", line: line)
            }
        }
        assertMalformed(rawHeader(keyLength: UInt64(Limits.maxKeyLength) + 1, valueLength: 1), "key over limit")
        assertMalformed(rawHeader(keyLength: 0, valueLength: 1), "empty key")
        assertMalformed(rawHeader(keyLength: UInt64.max, valueLength: 1), "huge key")
        assertMalformed(rawHeader(keyLength: 1, valueLength: UInt64(Limits.maxValueLength) + 1), "value over limit")
        assertMalformed(rawHeader(keyLength: 1, valueLength: UInt64.max), "huge value")
        assertMalformed(rawHeader(flags: RecordFlags.lz4, keyLength: 1, valueLength: 100, storedLength: 0), "empty lz4 payload")
        assertMalformed(rawHeader(flags: RecordFlags.lz4, keyLength: 1, valueLength: 100,
                                  storedLength: UInt64(LZ4Compressor.bound(100)) + 1), "lz4 payload over bound")
        assertMalformed(rawHeader(flags: RecordFlags.lz4, keyLength: 1, valueLength: 10, storedLength: UInt64(Int32.max)), "lz4 payload huge")
        assertMalformed(rawHeader(type: 0, keyLength: 1, valueLength: 1), "type 0")
        assertMalformed(rawHeader(type: 3, keyLength: 1, valueLength: 1), "batch commit with a 1-byte key")
        assertMalformed(rawHeader(type: 3, keyLength: 8, valueLength: 0), "batch commit without a count")
        assertMalformed(rawHeader(type: 3, flags: RecordFlags.batchMember, keyLength: 8, valueLength: 1), "batch commit with a flag")
        assertMalformed(rawHeader(type: 4, keyLength: 1, valueLength: 1), "type 4")
        assertMalformed(rawHeader(flags: 0x08, keyLength: 1, valueLength: 1), "unknown flag")
        assertMalformed(rawHeader(flags: 0x80, keyLength: 1, valueLength: 1), "unknown flag")
        assertMalformed(rawHeader(type: 2, keyLength: 1, valueLength: 5), "delete with a value")
        assertMalformed(rawHeader(type: 2, flags: RecordFlags.lz4, keyLength: 1, valueLength: 0, storedLength: 1), "compressed delete")
        assertMalformed(rawHeader(type: 2, flags: RecordFlags.expires, keyLength: 1, valueLength: 0), "expiring delete")
        // An 11-byte varint in a length field, with plenty of bytes after it.
        assertMalformed([0, 0, 0, 0, 1, 0, 1] + [UInt8](repeating: 0x80, count: 10) + [0] + [UInt8](repeating: 0, count: 20), "overlong varint")

        // The largest legal lengths parse; the record is then reported as cut short, not allocated.
        let header = rawHeader(keyLength: UInt64(Limits.maxKeyLength), valueLength: UInt64(Limits.maxValueLength))
        guard case .success(let parsed) = parse(header) else { return XCTFail("max lengths: \(parse(header))") }
        XCTAssertEqual(parsed.recordLength, header.count + Limits.maxKeyLength + Limits.maxValueLength)
        XCTAssertLessThanOrEqual(parsed.recordLength, Limits.maxRecordLength)
        XCTAssertEqual(validate(header), .failure(.truncated(needed: parsed.recordLength)))
    }

    // MARK: Segment header

    func testSegmentHeaderRoundTrip() {
        for (id, base) in [(UInt64(1), UInt64(1)), (42, 1_000_000), (UInt64(UInt32.max), Limits.maxSeq)] {
            let bytes = SegmentHeader(segmentID: id, baseSeq: base).encoded()
            XCTAssertEqual(bytes.count, SegmentHeader.length)
            XCTAssertEqual(Array(bytes[0..<8]), Array("CASKSEG".utf8) + [0])
            XCTAssertEqual(bytes[8], 1)
            XCTAssertEqual(bytes[9], 0)
            XCTAssertEqual(bytes[10], 40)
            let decoded = bytes.withUnsafeBytes { SegmentHeader.decode($0, encryption: nil).map(\.0) }
            XCTAssertEqual(decoded, .success(SegmentHeader(segmentID: id, baseSeq: base)))
            // Trailing record bytes do not disturb the header.
            XCTAssertEqual((bytes + [1, 2, 3]).withUnsafeBytes { SegmentHeader.decode($0, encryption: nil).map(\.0) }, decoded)
        }
    }

    func testSegmentHeaderFailures() {
        let good = SegmentHeader(segmentID: 7, baseSeq: 99).encoded()
        func decode(_ bytes: [UInt8]) -> Result<SegmentHeader, SegmentHeader.Problem> {
            bytes.withUnsafeBytes { SegmentHeader.decode($0, encryption: nil).map(\.0) }
        }
        func resealed(_ bytes: [UInt8]) -> [UInt8] {
            var bytes = bytes
            StoreFiles.rechecksumSegmentHeader(&bytes)
            return bytes
        }
        for length in 0..<SegmentHeader.length {
            XCTAssertEqual(decode(Array(good.prefix(length))), .failure(.tooShort), "prefix \(length)")
        }
        var badMagic = good
        badMagic[0] = UInt8(ascii: "X")
        XCTAssertEqual(decode(badMagic), .failure(.badMagic))
        XCTAssertEqual(decode(resealed(badMagic)), .failure(.badMagic))
        XCTAssertEqual(decode([UInt8](repeating: 0, count: 40)), .failure(.badMagic))
        // Every single-byte flip past the magic is caught by the checksum.
        for index in 8..<SegmentHeader.length {
            var damaged = good
            damaged[index] ^= 0x10
            XCTAssertEqual(decode(damaged), .failure(.badChecksum), "flip at \(index)")
        }
        // A newer format version with a valid checksum is unsupported, not corrupt.
        var version5 = good
        version5[8] = 5
        XCTAssertEqual(decode(resealed(version5)), .failure(.unsupportedVersion(5)))
        // Version 2 names a dictionary at offset 32; version 1 ignores what is there (reserved).
        var version2 = good
        version2[8] = 2
        XCTAssertEqual(decode(resealed(version2)), .failure(.dictionaryIDOutOfRange(0)))
        version2[32] = 5
        XCTAssertEqual(try decode(resealed(version2)).get().dictionaryID, 5)
        XCTAssertEqual(SegmentHeader(segmentID: 7, baseSeq: 99, dictionaryID: 5).encoded(), resealed(version2))
        version2[32...35] = [0xff, 0xff, 0xff, 0xff]
        XCTAssertEqual(decode(resealed(version2)), .failure(.dictionaryIDOutOfRange(UInt32.max)))
        var reservedSet = good
        reservedSet[32] = 5
        XCTAssertEqual(try decode(resealed(reservedSet)).get().dictionaryID, 0)
        var version0 = good
        version0[8] = 0
        XCTAssertEqual(decode(resealed(version0)), .failure(.unsupportedVersion(0)))
        var longerHeader = good
        longerHeader[10] = 48
        XCTAssertEqual(decode(resealed(longerHeader)), .failure(.unsupportedHeaderLength(48)))
        // A base seq no record could have, under a valid checksum, is damage too (found by fuzzing).
        var lastSeq = good, beyond = good
        for i in 0..<8 {
            lastSeq[24 + i] = UInt8(truncatingIfNeeded: Limits.maxSeq >> (8 * UInt64(i)))
            beyond[24 + i] = UInt8(truncatingIfNeeded: (Limits.maxSeq + 1) >> (8 * UInt64(i)))
        }
        XCTAssertEqual(try decode(resealed(lastSeq)).get().baseSeq, Limits.maxSeq)
        XCTAssertEqual(decode(resealed(beyond)), .failure(.baseSeqOutOfRange(Limits.maxSeq + 1)))
    }

    // MARK: Hint files

    private struct Segment {
        /// The segment bytes: header, then records.
        var bytes: [UInt8]
        var headers: [(Int64, RecordHeader, [UInt8])]
    }

    private func makeSegment(id: UInt64, records: Int, keyLength: ClosedRange<Int>, rng: inout SeededGenerator) -> Segment {
        var bytes = SegmentHeader(segmentID: id, baseSeq: 1).encoded()
        var headers: [(Int64, RecordHeader, [UInt8])] = []
        let encoder = RecordEncoder()
        for seq in 1...UInt64(records) {
            let key = rng.bytes(Int.random(in: keyLength, using: &rng))
            let type: RecordType = seq % 7 == 0 ? .delete : .put
            let value = type == .delete ? [] : (seq % 3 == 0 ? [UInt8](repeating: 1, count: 200) : rng.bytes(Int.random(in: 0..<50, using: &rng)))
            let expiresAt: UInt64? = type == .put && seq % 5 == 0 ? 1_234_567 + seq : nil
            let record = encodeRecord(type, seq: seq * 3, key: key, value: value, expiresAt: expiresAt, encoder: encoder)
            guard case .success(let header) = validate(record) else { XCTFail("record"); continue }
            headers.append((Int64(bytes.count), header, key))
            bytes += record
        }
        return Segment(bytes: bytes, headers: headers)
    }

    private func makeHint(_ segment: Segment, id: UInt64) -> [UInt8] {
        var encoder = HintFile.Encoder(segmentID: id)
        for (_, header, key) in segment.headers {
            key.withUnsafeBytes { encoder.add(header, key: $0) }
        }
        return encoder.finish()
    }

    private struct Entry: Equatable {
        var offset: Int64, type: RecordType, flags: UInt8, seq: UInt64, recordLength: Int, valueLength: Int, expiresAt: UInt64?, key: [UInt8]
    }

    private func readHint(_ hint: [UInt8], id: UInt64, segmentLength: Int64) -> (HintFile.Summary, [Entry])? {
        var entries: [Entry] = []
        let summary = hint.withUnsafeBytes { raw in
            HintFile.forEachEntry(in: raw, segmentID: id, segmentLength: segmentLength, sealing: nil, keyPrefix: []) { e in
                entries.append(Entry(offset: e.offset, type: e.type, flags: e.flags, seq: e.seq, recordLength: e.recordLength,
                                     valueLength: e.valueLength, expiresAt: e.expiresAt, key: Array(e.key)))
            }
        }
        guard let summary else {
            XCTAssertTrue(entries.isEmpty, "entries were delivered from an invalid hint")
            return nil
        }
        return (summary, entries)
    }

    /// What recovery's single-pass `HintFile.apply` makes of a hint: nil unless every entry was applied.
    private func applyHint(_ hint: [UInt8], id: UInt64, segmentLength: Int64) -> (HintFile.Summary, [Entry])? {
        var entries: [Entry] = []
        let outcome = hint.withUnsafeBytes { raw in
            HintFile.apply(raw, segmentID: id, segmentLength: segmentLength, sealing: nil, keyPrefix: []) { e in
                entries.append(Entry(offset: e.offset, type: e.type, flags: e.flags, seq: e.seq, recordLength: e.recordLength,
                                     valueLength: e.valueLength, expiresAt: e.expiresAt, key: Array(e.key)))
            }
        }
        switch outcome {
        case .applied(let summary): return (summary, entries)
        case .invalid:
            XCTAssertTrue(entries.isEmpty, "entries were delivered from an invalid hint")
            return nil
        case .inconsistent: return nil  // the caller discards what was delivered
        }
    }

    private func assertHintMatches(_ segment: Segment, hint: [UInt8], id: UInt64, file: StaticString = #filePath, line: UInt = #line) {
        let applied = applyHint(hint, id: id, segmentLength: Int64(segment.bytes.count))
        let read = readHint(hint, id: id, segmentLength: Int64(segment.bytes.count))
        XCTAssertEqual(applied?.0, read?.0, "apply and forEachEntry disagree", file: file, line: line)
        XCTAssertTrue(applied?.1 == read?.1, "apply and forEachEntry disagree", file: file, line: line)
        guard let (summary, entries) = readHint(hint, id: id, segmentLength: Int64(segment.bytes.count)) else {
            return XCTFail("valid hint rejected", file: file, line: line)
        }
        XCTAssertEqual(summary, HintFile.Summary(segmentID: id, coveredLength: Int64(segment.bytes.count), entryCount: UInt64(segment.headers.count)), file: file, line: line)
        let expected = segment.headers.map { offset, h, key in
            Entry(offset: offset, type: h.type, flags: h.flags, seq: h.seq, recordLength: h.recordLength, valueLength: h.valueLength, expiresAt: h.expiresAt, key: key)
        }
        XCTAssertEqual(entries.count, expected.count, file: file, line: line)
        XCTAssertTrue(entries == expected, "hint entries differ from the records", file: file, line: line)
    }

    func testHintFileRoundTrip() {
        var rng = SeededGenerator(seed: 31)
        // Small, random keys (probably stored raw).
        let small = makeSegment(id: 3, records: 60, keyLength: 1...30, rng: &rng)
        assertHintMatches(small, hint: makeHint(small, id: 3), id: 3)
        // Enough entries for several blocks of 1 MiB, with long keys.
        let large = makeSegment(id: 9, records: 12_000, keyLength: 1...300, rng: &rng)
        let largeHint = makeHint(large, id: 9)
        XCTAssertGreaterThan(largeHint.withUnsafeBytes { $0.readLittleEndian(at: 12, as: UInt32.self) }, 1, "expected several blocks")
        assertHintMatches(large, hint: largeHint, id: 9)
        // Compressible keys (the block is stored lz4-compressed).
        var compressibleHeaders: [(Int64, RecordHeader, [UInt8])] = []
        var bytes = SegmentHeader(segmentID: 4, baseSeq: 1).encoded()
        for i in 0..<500 {
            let key = Array("user/profile/\(String(repeating: "0", count: 8))\(i)".utf8)
            let record = encodeRecord(.put, seq: UInt64(i + 1), key: key, value: [UInt8](repeating: 0, count: 10))
            compressibleHeaders.append((Int64(bytes.count), try! validate(record).get(), key))
            bytes += record
        }
        let compressible = Segment(bytes: bytes, headers: compressibleHeaders)
        let compressibleHint = makeHint(compressible, id: 4)
        XCTAssertEqual(compressibleHint.withUnsafeBytes { $0.readLittleEndian(at: HintFile.headerLength + 8, as: UInt32.self) }, 2, "a zstd frame")
        assertHintMatches(compressible, hint: compressibleHint, id: 4)
        // No records at all.
        let empty = Segment(bytes: SegmentHeader(segmentID: 5, baseSeq: 1).encoded(), headers: [])
        let emptyHint = makeHint(empty, id: 5)
        XCTAssertEqual(emptyHint.count, HintFile.headerLength)
        assertHintMatches(empty, hint: emptyHint, id: 5)
    }

    /// Version 3 entries code each seq and key against the block's entry before: seqs that go down
    /// (a compaction's output), the largest seq, keys that extend, shorten, repeat or share nothing
    /// with the key before, all come back as they went in.
    func testHintEntriesCodedAgainstTheEntryBeforeRoundTrip() {
        let records: [(String, UInt64)] = [
            ("drafts/ada/1000", 10), ("drafts/ada/1001", 11), ("drafts/ada", 3), ("drafts/ada/1001/x", Limits.maxSeq),
            ("zed", 1), ("zed", 2), ("drafts/ada/1000", 9), ("z", 12), (String(repeating: "k", count: Limits.maxKeyLength), 4),
            (String(repeating: "k", count: Limits.maxKeyLength - 1) + "j", 5), ("a", Limits.maxSeq - 1),
        ]
        var bytes = SegmentHeader(segmentID: 6, baseSeq: 1).encoded()
        var headers: [(Int64, RecordHeader, [UInt8])] = []
        for (key, seq) in records {
            let record = encodeRecord(.put, seq: seq, key: Array(key.utf8), value: Array("v\(seq)".utf8))
            headers.append((Int64(bytes.count), try! validate(record).get(), Array(key.utf8)))
            bytes += record
        }
        let segment = Segment(bytes: bytes, headers: headers)
        let hint = makeHint(segment, id: 6)
        XCTAssertEqual(hint.withUnsafeBytes { $0.readLittleEndian(at: 8, as: UInt16.self) }, 3, "version 3")
        assertHintMatches(segment, hint: hint, id: 6)
    }

    /// A version 3 hint made by hand: a raw block of `entries`, describing `coveredLength` segment bytes.
    private func handMadeHint(id: UInt64, entries: [[UInt8]], coveredLength: Int) -> [UInt8] {
        let block = entries.flatMap { $0 }
        var header = HintFile.magic + [3, 0, 48, 0, 1, 0, 0, 0]
        for field in [id, UInt64(coveredLength), UInt64(entries.count)] { header += withUnsafeBytes(of: field.littleEndian, Array.init) }
        header += [0, 0, 0, 0]
        header += withUnsafeBytes(of: CRC32C.checksum(of: header).littleEndian, Array.init)
        var blockHeader: [UInt8] = []
        for field in [UInt32(block.count), UInt32(block.count), 0, CRC32C.checksum(of: block)] {
            blockHeader += withUnsafeBytes(of: field.littleEndian, Array.init)
        }
        return header + blockHeader + block
    }

    /// Each refusal of a version 3 entry beside the same entry made valid: a `shared` longer than the
    /// key before, a seq delta that leaves 1 ... 2^63 − 1 or overflows, a key of no bytes.
    func testHintEntriesCodedAgainstTheEntryBeforeAreCheckedStrictly() {
        // put, no flags, seq 5, record of 12 bytes, value 1 byte, shared 0, key "ab".
        let first: [UInt8] = [1, 0, 10, 12, 1, 0, 2] + Array("ab".utf8)
        // The same with the largest seq: zigzag(2^63 - 1) = 2^64 - 2, a 10-byte varint; record of 20 bytes.
        let firstAtMax: [UInt8] = [1, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 20, 1, 0, 2] + Array("ab".utf8)
        func check(
            _ leading: [UInt8], _ leadingLength: Int, valid: [UInt8], invalid: [UInt8], length: Int, invalidLength: Int? = nil, _ what: String
        ) {
            let covered = SegmentHeader.length + leadingLength + length
            let good = handMadeHint(id: 8, entries: [leading, valid], coveredLength: covered)
            XCTAssertNotNil(readHint(good, id: 8, segmentLength: Int64(covered)), "valid: \(what)")
            XCTAssertNotNil(applyHint(good, id: 8, segmentLength: Int64(covered)), "valid: \(what)")
            let badCovered = SegmentHeader.length + leadingLength + (invalidLength ?? length)
            let bad = handMadeHint(id: 8, entries: [leading, invalid], coveredLength: badCovered)
            XCTAssertNil(readHint(bad, id: 8, segmentLength: Int64(badCovered)), what)
            XCTAssertNil(applyHint(bad, id: 8, segmentLength: Int64(badCovered)), what)
        }
        // Key "abx" (3 bytes, record of 13): shared 2 + "x" is fine, shared 3 + "" reaches past "ab".
        check(first, 12, valid: [1, 0, 2, 13, 1, 2, 1] + Array("x".utf8), invalid: [1, 0, 2, 13, 1, 3, 0], length: 13, "shared past the key before")
        // Seq 5 - 4 = 1 is fine; 5 - 5 = 0 is not (zigzag(-4) = 7, zigzag(-5) = 9).
        check(first, 12, valid: [1, 0, 7, 12, 1, 0, 2] + Array("cd".utf8), invalid: [1, 0, 9, 12, 1, 0, 2] + Array("cd".utf8), length: 12, "seq 0")
        // From the largest seq: - 1 is fine, + 1 is past it.
        check(firstAtMax, 20, valid: [1, 0, 1, 20, 1, 0, 2] + Array("cd".utf8), invalid: [1, 0, 2, 20, 1, 0, 2] + Array("cd".utf8), length: 20, "seq past 2^63 - 1")
        // A delta of 2^63 - 1 from the largest seq overflows a signed 64-bit sum.
        check(firstAtMax, 20, valid: [1, 0, 1, 20, 1, 0, 2] + Array("cd".utf8),
              invalid: [1, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 20, 1, 0, 2] + Array("cd".utf8), length: 20, "seq overflow")
        // A key of 0 bytes (record of 10 bytes as its length would give) against one of 1.
        check(first, 12, valid: [1, 0, 2, 11, 1, 1, 0], invalid: [1, 0, 2, 10, 1, 0, 0], length: 11, invalidLength: 10, "empty key")
    }

    func testHintFileRejectsDamage() {
        var rng = SeededGenerator(seed: 32)
        let segment = makeSegment(id: 12, records: 40, keyLength: 1...20, rng: &rng)
        let length = Int64(segment.bytes.count)
        var compressibleBytes = SegmentHeader(segmentID: 12, baseSeq: 1).encoded()
        var compressibleHeaders: [(Int64, RecordHeader, [UInt8])] = []
        for i in 0..<40 {
            let key = Array("key-\(1000 + i)".utf8)
            let record = encodeRecord(.put, seq: UInt64(i + 1), key: key, value: [7, 7, 7])
            compressibleHeaders.append((Int64(compressibleBytes.count), try! validate(record).get(), key))
            compressibleBytes += record
        }
        let compressible = Segment(bytes: compressibleBytes, headers: compressibleHeaders)

        for sample in [segment, compressible] {
            let hint = makeHint(sample, id: 12)
            let sampleLength = Int64(sample.bytes.count)
            XCTAssertNotNil(readHint(hint, id: 12, segmentLength: sampleLength))
            // Every single-byte flip is detected.
            for index in hint.indices {
                for mask: UInt8 in [0x01, 0x80, 0xFF] {
                    var damaged = hint
                    damaged[index] ^= mask
                    XCTAssertNil(readHint(damaged, id: 12, segmentLength: sampleLength), "flip 0x\(String(mask, radix: 16)) at \(index) of \(hint.count)")
                    XCTAssertNil(applyHint(damaged, id: 12, segmentLength: sampleLength), "apply: flip 0x\(String(mask, radix: 16)) at \(index)")
                }
            }
            // Every truncation, and extra bytes.
            for cut in 0..<hint.count {
                XCTAssertNil(readHint(Array(hint.prefix(cut)), id: 12, segmentLength: sampleLength), "cut at \(cut)")
                XCTAssertNil(applyHint(Array(hint.prefix(cut)), id: 12, segmentLength: sampleLength), "apply: cut at \(cut)")
            }
            XCTAssertNil(readHint(hint + [0], id: 12, segmentLength: sampleLength), "trailing byte")
        }

        let hint = makeHint(segment, id: 12)
        // The hint of another segment.
        XCTAssertNil(readHint(hint, id: 13, segmentLength: length))
        XCTAssertNil(readHint(hint, id: 11, segmentLength: length))
        // A hint covering more than the segment holds (the segment was cut after the hint was written).
        XCTAssertNil(readHint(hint, id: 12, segmentLength: length - 1))
        XCTAssertNil(applyHint(hint, id: 13, segmentLength: length))
        XCTAssertNil(applyHint(hint, id: 12, segmentLength: length - 1))
        XCTAssertNil(readHint(hint, id: 12, segmentLength: Int64(SegmentHeader.length)))
        // A segment longer than the hint covers is fine: the rest is scanned.
        XCTAssertEqual(readHint(hint, id: 12, segmentLength: length + 100)?.0.coveredLength, length)
    }
}
