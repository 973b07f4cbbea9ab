#if canImport(Glibc)
import Glibc
#endif

/// Step 1: copying the live records of an input into outputs, and the outputs' files.
extension Compactor {
    /// Records of an input read but not yet judged live or dead (see ``copyLive``).
    private struct Staged {
        var header: RecordHeader
        var location: RecordLocation
        /// Where the record's bytes start in the staging buffer.
        var start: Int
    }

    /// Records staged before they are judged against the index.
    private static let stagedGroup = 256

    /// Step 1 for one input. Returns the first damaged range found in it, if any (the copy is then
    /// incomplete and must be discarded).
    ///
    /// Records are staged (copied) as they are read and judged in groups of ``stagedGroup``
    /// against the index. Judging a record a little after reading it is as good as at once: a
    /// record that is live then is copied, and a write since then wins by compare-and-set at the
    /// switch.
    ///
    /// The judging takes no lock, as a get does (``KeyIndex/pointsWithoutLock(_:at:)``): a put is
    /// live when its key's entry points at it, which a probe of the published table answers without
    /// reading stored keys; a tombstone when its key is absent, which such a probe answers when no
    /// entry on the path matches the key's hash bits — the others (an entry of another key, or of
    /// this one) are looked up exactly, under the shared lock, all of a group's at once. (Under a
    /// shared lock per group of 256, puts waited for it: 0.33–0.44× their rate during a compaction.)
    func copyLive(
        from input: SegmentFile, dropBelow: UInt64, now: UInt64, recompression: Recompression, outputKeyPrefix: [UInt8], outputs: inout [Output],
        moves: inout [Move], keys: inout [UInt8], expired: inout [Move], result: inout CaskStore.CompactionResult
    ) throws(CaskError) -> DamagedRange? {
        let length = input.writtenLength.load(ordering: .acquiring)
        var reader = SegmentReader(file: input, length: length, isActive: false, lockHeld: true, encryption: encryption, fileSystem: fileSystem)
        let keyPrefix = input.keyPrefixBytes  // the input outlives the copy
        var staging = ByteBuffer(capacity: 64 << 10)
        var staged: [Staged] = []
        staged.reserveCapacity(Self.stagedGroup)
        var current: [RecordLocation?] = []
        current.reserveCapacity(Self.stagedGroup)

        func judgeStaged() throws(CaskError) {
            guard !staged.isEmpty else { return }
            staging.withUnsafeBytes { raw in
                var unsure: [Int] = []
                state.withoutLocking { shared in
                    for (position, record) in staged.enumerated() {
                        // What `judge` compares: a put's own location when the index points at it,
                        // a tombstone's key's location (nil: absent).
                        current.append(record.header.withKey(in: UnsafeRawBufferPointer(rebasing: raw[record.start...]), prefix: keyPrefix) { key in
                            ReaderRegistry.shared.read { () -> RecordLocation? in
                                switch record.header.type {
                                case .put: return shared.index.pointsWithoutLock(key, at: record.location) ? record.location : nil
                                case .delete:
                                    if shared.index.probableLocationWithoutLock(key) != .absent { unsure.append(position) }
                                    return nil
                                case .batch: return nil
                                }
                            }
                        })
                    }
                }
                guard !unsure.isEmpty else { return }
                state.read { shared in
                    for position in unsure {
                        let record = staged[position]
                        current[position] = record.header.withKey(in: UnsafeRawBufferPointer(rebasing: raw[record.start...]), prefix: keyPrefix) {
                            shared.index.lookup($0)
                        }
                    }
                }
            }
            for (record, current) in zip(staged, current) {
                try judge(record, current: current, staging: staging, dropBelow: dropBelow, now: now, input: input,
                          recompression: recompression, outputKeyPrefix: outputKeyPrefix, outputs: &outputs, moves: &moves, keys: &keys, expired: &expired, result: &result)
            }
            staged.removeAll(keepingCapacity: true)
            current.removeAll(keepingCapacity: true)
            staging.count = 0
        }

        var failure: CaskError?
        var batch = BatchAssembler()
        let outcome = try reader.readRecords(
            from: input.contentStart, batch: &batch,
            onRecord: { offset, header, bytes in
                guard failure == nil else { return }
                let location = RecordLocation(segmentID: UInt32(input.id), offset: UInt32(offset), length: UInt32(header.recordLength))
                staged.append(Staged(header: header, location: location, start: staging.count))
                staging.append(bytes)
                if staged.count == Self.stagedGroup {
                    do throws(CaskError) { try judgeStaged() } catch { failure = error }
                }
            })
        if let failure { throw failure }
        if let damage = outcome.damage.first {
            return damage
        }
        try judgeStaged()
        return nil
    }

    /// Copies one staged record if it is still needed, given `current`, where the index points for its key.
    private func judge(
        _ record: Staged, current: RecordLocation?, staging: borrowing ByteBuffer, dropBelow: UInt64, now: UInt64, input: SegmentFile,
        recompression: Recompression, outputKeyPrefix: [UInt8], outputs: inout [Output], moves: inout [Move], keys: inout [UInt8], expired: inout [Move],
        result: inout CaskStore.CompactionResult
    ) throws(CaskError) {
        let header = record.header, location = record.location
        let keep: Bool
        var forget = false
        switch header.type {
        case .put where (header.expiresAt ?? .max) > now:
            keep = current == location
        case .put:  // expired: hides older puts of its key, like a tombstone
            keep = current == location && header.seq >= dropBelow
            forget = current == location && !keep
        case .delete:
            keep = current == nil && header.seq >= dropBelow
        case .batch:
            keep = false  // a commit record: its members are copied as ordinary records
        }
        if forget {
            expired.append(Move(keyStart: keys.count, keyLength: header.keyLength, old: location, new: location, isPut: false))
            staging.withUnsafeBytes { header.appendKey(in: UnsafeRawBufferPointer(rebasing: $0[record.start...]), prefix: input.keyPrefixBytes, to: &keys) }
        }
        guard keep else {
            result.recordsDropped += 1
            return
        }
        // The record's plain form (the reader's: decrypted, without its tag), or a new one compressed again.
        let recompressed = try staging.withUnsafeBytes { (raw) throws(CaskError) in
            try recompression.recompress(
                UnsafeRawBufferPointer(rebasing: raw[record.start..<(record.start + header.payloadEnd)]), header: header, from: input,
                offset: location.offset)
        }
        // At most this long: in an output that elides none of its key, a record gains the bytes it elided.
        let longest = (recompressed ?? header.payloadEnd) + header.elidedLength + (encryption == nil ? 0 : FileCipher.tagLength)
        let output = try destination(for: longest, outputs: &outputs, dictionary: recompression.dictionary, keyPrefix: outputKeyPrefix)
        let start = output.buffer.count
        if recompressed != nil {
            recompression.record.withUnsafeBytes { plain in
                // Parsed when it was made, by the encoder (the key whole): its header is valid.
                guard case .success(let made) = RecordHeader.parse(plain, keyPrefixLength: 0) else { preconditionFailure("a recompressed record parses") }
                append(plain, header: made, clearingBatchMember: false, keyPrefix: .init(start: nil, count: 0), to: output)
            }
        } else {
            // A committed batch member goes on as an ordinary record (its commit record is not
            // copied): the flag is cleared, and the record checksummed again.
            staging.withUnsafeBytes { raw in
                append(UnsafeRawBufferPointer(rebasing: raw[record.start..<(record.start + header.payloadEnd)]), header: header,
                       clearingBatchMember: header.flags & RecordFlags.batchMember != 0, keyPrefix: input.keyPrefixBytes, to: output)
            }
        }
        let length = output.buffer.count - start
        let newLocation = RecordLocation(segmentID: UInt32(output.id), offset: UInt32(output.length), length: UInt32(length))
        output.length += Int64(length)
        output.stats.noteRecord(seq: header.seq, valueLength: header.valueLength)
        output.stats.fileBytes = output.length
        if output.buffer.count >= Output.chunk { try flush(output, wholeChunksOnly: true) }
        moves.append(Move(keyStart: keys.count, keyLength: header.keyLength, old: location, new: newLocation, isPut: header.type == .put))
        staging.withUnsafeBytes { header.appendKey(in: UnsafeRawBufferPointer(rebasing: $0[record.start...]), prefix: input.keyPrefixBytes, to: &keys) }
        result.recordsCopied += 1
    }

    /// Appends the record whose plain form is `plain`, read from a segment whose key prefix is
    /// `keyPrefix`, to `output`'s buffer, as it is to be written at the output's end: byte for byte
    /// in a store that is not encrypted (unless its batch member flag is to be cleared), with a new
    /// header when the output's key prefix makes it elide other key bytes, sealed with the output's
    /// cipher in an encrypted one.
    private func append(
        _ plain: UnsafeRawBufferPointer, header: RecordHeader, clearingBatchMember: Bool, keyPrefix: UnsafeRawBufferPointer, to output: Output
    ) {
        output.keyPrefix.withUnsafeBytes { outputPrefix in
            let prefixes = (from: keyPrefix, to: outputPrefix)
            if RecordEncoder.needsNewHeader(header, plain: plain, keyPrefix: prefixes) {
                _ = RecordEncoder.appendRekeyed(plain: plain, header: header, clearingBatchMember: clearingBatchMember, keyPrefix: prefixes, to: &output.buffer)
            } else if output.sealing != nil || clearingBatchMember {
                _ = RecordEncoder.appendRecord(
                    plain: plain, header: header, clearingBatchMember: clearingBatchMember, cipher: output.sealing?.cipher, offset: output.length,
                    to: &output.buffer)
            } else {
                output.buffer.append(plain)
            }
        }
    }

    /// The output a record of `length` bytes goes to: the current one, or a new one when it is full.
    private func destination(
        for length: Int, outputs: inout [Output], dictionary: CompressionDictionary?, keyPrefix: [UInt8]
    ) throws(CaskError) -> Output {
        if let current = outputs.last, current.length == current.stats.headerBytes || current.length + Int64(length) <= options.maxSegmentSize {
            return current
        }
        if let full = outputs.last { try flush(full) }
        let id = writer.withLock { w in
            defer { w.nextSegmentID += 1 }
            return w.nextSegmentID
        }
        let temporaryPath = directory + "/" + SegmentName.segment(id) + ".tmp"
        let fd: Int32
        do throws(Errno) { fd = try fileSystem.open(temporaryPath, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o600) } catch {
            throw CaskError.from(error, operation: "create compaction output", path: temporaryPath)
        }
        let output = Output(
            id: id, directory: directory, fd: fd, temporaryPath: temporaryPath, dictionary: dictionary, encryption: encryption,
            keyPrefix: keyPrefix)
        outputs.append(output)
        return output
    }

    /// Writes the output's buffer to its file: all of it, or with `wholeChunksOnly` only whole
    /// ``Output/chunk``s (the rest stays buffered), so that every write but the last is one aligned chunk.
    func flush(_ output: Output, wholeChunksOnly: Bool = false) throws(CaskError) {
        let count = wholeChunksOnly ? output.buffer.count / Output.chunk * Output.chunk : output.buffer.count
        guard count > 0 else { return }
        do throws(Errno) {
            try output.buffer.withUnsafeBytes { (raw) throws(Errno) in
                try fileSystem.writeAll(output.fd, from: UnsafeRawBufferPointer(rebasing: raw[0..<count]), at: output.flushed)
            }
        } catch {
            throw CaskError.from(error, operation: "write compaction output", path: output.temporaryPath)
        }
        output.flushed += Int64(count)
        output.buffer.removeFirst(count)
    }
}
