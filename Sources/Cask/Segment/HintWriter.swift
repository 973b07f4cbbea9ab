/// Writes the hint file of a segment by scanning it: one sequential read, no index involvement.
package enum HintWriter {
    package enum Outcome: Equatable {
        case written(entries: Int)
        /// The segment has damage; no hint is written so every open keeps reporting it.
        case skippedCorrupt
        /// Compaction deleted the segment meanwhile.
        case skippedRetired
    }

    /// Scans `file` up to `length`, makes the segment durable, and writes `DIR/<id>.hint`
    /// atomically (temporary file, fsync, rename, directory fsync). Safe while appends go on past `length`.
    /// `encryption`: the store's (nil: not encrypted); an encrypted segment's hint is sealed with it.
    package static func write(
        for file: SegmentFile, length: Int64, directory: String, encryption: StoreEncryption?, fileSystem: any FileSystem
    ) throws(CaskError) -> Outcome {
        // Sealed: its end is final, and any bytes that are not records are damage.
        var reader = SegmentReader(file: file, length: length, isActive: false, lockHeld: true, encryption: encryption, fileSystem: fileSystem)
        var encoder = HintFile.Encoder(segmentID: file.id, keyPrefix: file.keyPrefix, sealing: reader.hintSealing)
        let keyPrefix = file.keyPrefixBytes  // the file outlives the scan
        var entries = 0
        var batch = BatchAssembler()
        let outcome = try reader.readRecords(from: file.contentStart, batch: &batch, onRecord: { _, header, bytes in
            header.withKey(in: bytes, prefix: keyPrefix) { encoder.add(header, key: $0) }
            entries += 1
        })
        // Reserved zeros at its end (a crash can leave them after a sealed segment) are no record and
        // no damage: the hint covers the records, and a reader scans the zeros after them.
        guard outcome.damage.isEmpty else { return .skippedCorrupt }
        let bytes = encoder.finish()
        let path = directory + "/" + SegmentName.hint(file.id)
        // The hint must never describe records the disk does not hold yet.
        do { try fileSystem.fdatasync(file.fd) } catch {
            throw CaskError.syncFailed(path: file.path, errno: error)
        }
        return try file.retired.withLock { (retired) throws(CaskError) -> Outcome in
            guard !retired else { return .skippedRetired }
            do throws(Errno) {
                try fileSystem.writeFileAtomically(path, directory: directory, bytes: bytes)
            } catch {
                throw CaskError.from(error, operation: "write hint file", path: path)
            }
            return .written(entries: entries)
        }
    }
}
