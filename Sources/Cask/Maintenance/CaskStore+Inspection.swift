extension CaskStore {
    /// Reports every record of every segment in `directory` (or of segment `segment` only), in
    /// file order: each segment, then its records and damaged byte ranges as they come — except
    /// that the records of a batch found incomplete (and the end of a segment) are reported as
    /// damage once that is known, after the records that show it.
    ///
    /// Reads the segment files as they are, with no index: overwritten and deleted records, batch
    /// members and batch commits included. Each record's lengths and checksum are checked as opening
    /// the store checks them (``verify(at:progress:)`` also decompresses payloads and checks hint
    /// files); damage is reported, never thrown. Opens nothing for writing, takes no lock and changes
    /// nothing, so it runs next to a process that has the store open for writing.
    ///
    /// Throws when the directory or a segment cannot be read at all, when a segment has another
    /// format (``CaskError/unsupportedFormat(path:version:)``), and when `segment` names a segment
    /// file that does not exist. `visit` is called on the calling thread. Complexity: O(bytes of the
    /// segments read); memory: a 1 MiB read window (larger only for a larger record).
    ///
    /// An encrypted store is read with its key (`encryption`): records are reported decrypted, and
    /// one whose tag does not hold is damage.
    public static func inspect(
        at directory: String, segment: UInt64? = nil, encryption: Encryption = .none, _ visit: (InspectedItem) -> Void
    ) throws(CaskError) {
        let fileSystem = PosixFileSystem()
        switch fileSystem.isDirectory(directory) {
        case .some(true): break
        case .some(false): throw CaskError.io(operation: "inspect", path: directory, errno: .notDirectory)
        case .none: throw CaskError.directoryMissing(path: directory)
        }
        let storeEncryption = try StoreEncryption.open(directory: directory, requested: encryption, creating: false, fileSystem: fileSystem)
        let listing = try StoreDirectory(listing: directory, encryption: storeEncryption, fileSystem: fileSystem)
        for id in segment.map({ [$0] }) ?? listing.segmentIDs {
            let path = listing.segmentPath(id)
            var keyPrefix: [UInt8] = []
            let outcome = try SegmentReader.read(
                segment: id, of: listing, encryption: storeEncryption, fileSystem: fileSystem,
                onOpen: { length, header, recordKeyPrefix in
                    keyPrefix = recordKeyPrefix
                    visit(.segment(InspectedSegment(
                        id: id, file: path, bytes: length, baseSeq: header?.baseSeq,
                        dictionaryID: header.flatMap { $0.dictionaryID == 0 ? nil : $0.dictionaryID }, keyPrefix: recordKeyPrefix)))
                },
                onRecord: { offset, header, bytes in
                    let key = keyPrefix.withUnsafeBytes { header.key(in: bytes, prefix: $0) }
                    var committed: Range<UInt64>?
                    if header.type == .batch {
                        let first = key.withBytes { BatchAssembler.firstSeq(ofCommitKey: $0) }
                        if first < header.seq { committed = first..<header.seq }
                    }
                    visit(.record(InspectedRecord(
                        segmentID: id, offset: offset, bytes: header.recordLength, type: header.type, seq: header.seq, key: key,
                        valueBytes: header.valueLength, storedBytes: header.storedLength, isCompressed: header.isCompressed,
                        usesDictionary: header.usesDictionary, isBatchMember: header.flags & RecordFlags.batchMember != 0,
                        elidedKeyBytes: header.elidedLength, expiresAtMilliseconds: header.expiresAt, committedSeqs: committed)))
                },
                onDamage: { damage in
                    visit(.damage(damage))
                })
            let found = outcome != nil
            if !found && segment != nil {
                throw CaskError.io(operation: "open", path: path, errno: .noEntry)
            }
        }
    }
}
