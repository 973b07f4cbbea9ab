#if canImport(Glibc)
import Glibc
#endif

extension SegmentReader {
    /// Opens segment `id` of `directory` read-only and reads it whole: `onOpen` gets the file's
    /// length, its header (nil when invalid) and the key prefix its records are read with (the
    /// header's; behind a damaged one, the one the segment's hint file holds when the hint is valid,
    /// as the open takes it) first, then `onRecord` each valid record and
    /// `onDamage` each damaged range, in file order as far as they can be known as they come (see
    /// ``readRecords(from:settled:batch:onRecord:onDamage:onBatch:)``) — a tail that the segment's
    /// hint file shows was lost last. Returns nil, having called nothing, when the file no longer
    /// exists (a compaction removed it after the directory was listed). For the readers that change
    /// nothing: `verify`, `inspect`, repair.
    package static func read(
        segment id: UInt64, of directory: StoreDirectory, lockHeld: Bool = false, encryption: StoreEncryption?, fileSystem: any FileSystem,
        onOpen: (_ length: Int64, _ header: SegmentHeader?, _ keyPrefix: [UInt8]) -> Void = { _, _, _ in },
        onRecord: (_ offset: Int64, RecordHeader, UnsafeRawBufferPointer) -> Void,
        onDamage: (DamagedRange) -> Void = { _ in }
    ) throws(CaskError) -> Outcome? {
        let path = directory.segmentPath(id)
        return try reading(
            segment: id, at: path, isActive: id == directory.activeSegmentID, lockHeld: lockHeld, encryption: encryption, fileSystem: fileSystem
        ) { (reader, length) throws(CaskError) -> Outcome in
            let (header, _) = try reader.readHeader()
            if header == nil, encryption == nil, directory.hintedIDs.contains(id),
               case .read(let hint) = readHint(of: id, segmentLength: length, at: directory.hintPath(id), beyondSegment: false, sealing: nil, fileSystem: fileSystem),
               let summary = hint.withUnsafeBytes({ HintFile.forEachEntry(in: $0, segmentID: id, segmentLength: length, sealing: nil, keyPrefix: nil) { _ in } }) {
                reader.takeKeyPrefix(fromHint: summary.keyPrefix)
            }
            onOpen(length, header, reader.keyPrefix)
            var batch = BatchAssembler()
            var outcome = try reader.readRecords(from: reader.contentStart, batch: &batch, onRecord: onRecord, onDamage: onDamage)
            if directory.hintedIDs.contains(id), let lost = lostTail(
                segmentID: id, path: path, segmentLength: length, hintPath: directory.hintPath(id), sealing: reader.hintSealing, fileSystem: fileSystem
            ) {
                onDamage(lost)
                outcome.damage.append(lost)
            }
            return outcome
        }
    }

    /// Opens the segment file `id` at `path` read-only and calls `body` with a reader of it and the
    /// file's length (`isActive`: read as the segment a writer appends to, whose header may be a
    /// torn creation and whose end a torn tail); the file stays open until `body` returns. Returns
    /// nil, having called nothing, when the file no longer exists.
    package static func reading<R>(
        segment id: UInt64, at path: String, isActive: Bool, lockHeld: Bool, encryption: StoreEncryption?, fileSystem: any FileSystem,
        _ body: (inout SegmentReader, _ length: Int64) throws(CaskError) -> R
    ) throws(CaskError) -> R? {
        let file: OpenFile
        do { file = try fileSystem.openFile(path, flags: O_RDONLY, mode: 0) } catch {
            if error == .noEntry { return nil }
            throw CaskError.from(error, operation: "open", path: path, reading: true)
        }
        let length: Int64
        do { length = try fileSystem.fileSize(file.descriptor) } catch {
            throw CaskError.from(error, operation: "fstat", path: path, reading: true)
        }
        // `file` stays open to the end of this function, while the reader reads its descriptor.
        var reader = SegmentReader(
            fd: file.descriptor, id: id, path: path, length: length, isActive: isActive, lockHeld: lockHeld, encryption: encryption,
            fileSystem: fileSystem)
        return try body(&reader, length)
    }
}
