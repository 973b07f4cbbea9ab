#if canImport(Glibc)
import Glibc
#endif

/// The files of a store directory, listed once and named once (FORMAT.md, "The store directory"):
/// its segments, the active one among them, their hint files, a compaction manifest and what it
/// retires, leftover temporary files and stray files. Every reader of a store — the open, `verify`,
/// `inspect`, repair — starts from one of these, so they agree on which files make up the store.
///
/// Listing reads the directory, the manifest (if any) and each segment's 40-byte header (to find
/// the active segment); it changes nothing. Not thread-safe; a value, cheap to copy.
package struct StoreDirectory {
    /// A file that looks like a store's but is not one of its files (a bad name, an id out of
    /// range): every reader ignores it and reports it, and nothing removes it.
    package struct StrayFile: Equatable, Sendable {
        package var name: String
        package var reason: String
    }

    /// The `COMPACTION` manifest, when there is one.
    package enum Manifest: Equatable {
        /// It lists these segments: replaced by a compaction that did not get to remove them all.
        case valid(inputs: [UInt64])
        /// It cannot be trusted (every reader ignores it, nothing is removed on its word).
        case invalid(reason: String)
    }

    /// The directory's path.
    package let path: String
    /// The store's segments, by id: every segment file with a valid name, less those a valid
    /// manifest retires.
    package private(set) var segmentIDs: [UInt64] = []
    /// Segments a valid manifest retires that are still present.
    package private(set) var retiredIDs: [UInt64] = []
    /// The active segment (FORMAT.md): the one with the highest base seq, ties to the highest id; a
    /// newest segment whose header is invalid is the active one only when its creation was torn
    /// (``isTornCreation(_:in:encryption:fileSystem:)``: no hint file, and too short or empty for a
    /// record). Otherwise its header is damage, and no segment is active: a writer starts a new one
    /// rather than append to — or cut the tail of — a segment sealed before, or a file that only
    /// has a segment's name. Nil without segments.
    package private(set) var activeSegmentID: UInt64?
    /// Segments (of ``segmentIDs``) that have a hint file.
    package private(set) var hintedIDs: Set<UInt64> = []
    /// Whether the directory holds a store: a segment (a store's first open creates one before
    /// anything else). In a directory that does not, no file is the store's, whatever its name:
    /// nothing there is deleted, adopted or repaired.
    package var holdsStore: Bool { !segmentIDs.isEmpty || !retiredIDs.isEmpty }
    /// The dictionary files (`NNNNNNNNNN.dict`), by id, ascending.
    package private(set) var dictionaryIDs: [UInt32] = []
    /// Hint files whose segment is neither present nor retired, by the id in their name.
    package private(set) var orphanHintIDs: [UInt64] = []
    package private(set) var manifest: Manifest?
    /// Leftover temporary files of an interrupted write: one of the store's own names (a
    /// segment's, a hint's, a dictionary's, `COMPACTION`, `ENCRYPTION`, `REKEYED`, `LOCK`) and
    /// `.tmp` (a writer's open removes them). Any other `*.tmp` is not the store's, and is left alone.
    package private(set) var leftovers: [String] = []
    package private(set) var strays: [StrayFile] = []
    /// Whether a `REKEYED` file is there: a key change was interrupted after its swap.
    package private(set) var hasRekeyMarker = false

    /// The files every reader ignores, as reports name them: `path: why`.
    package var ignoredFiles: [String] {
        strays.map { "\(file($0.name)): \($0.reason)" }
            + orphanHintIDs.map { "\(hintPath($0)): there is no segment \(SegmentName.segment($0)) for it" }
    }

    package func file(_ name: String) -> String { path + "/" + name }
    package func segmentPath(_ id: UInt64) -> String { file(SegmentName.segment(id)) }
    package func hintPath(_ id: UInt64) -> String { file(SegmentName.hint(id)) }
    package func dictionaryPath(_ id: UInt32) -> String { file(SegmentName.dictionary(UInt64(id))) }

    /// Lists the store directory at `path`. Throws when it cannot be listed (missing, not a
    /// directory, unreadable); a segment whose header cannot be read is left for its reader to report.
    /// `encryption`: an encrypted store's, whose segment headers count for the active segment only
    /// when they authenticate (nobody without the key can then choose it).
    package init(listing path: String, encryption: StoreEncryption?, fileSystem: any FileSystem) throws(CaskError) {
        self.path = path
        var names: [String]
        var attempts = 0
        while true {
            do { names = try fileSystem.listDirectory(path) } catch {
                throw CaskError.from(error, operation: "list directory", path: path, reading: true)
            }
            guard names.contains(CompactionManifest.fileName) else { break }
            manifest = try Self.readManifest(file(CompactionManifest.fileName), fileSystem: fileSystem)
            // Gone since the listing: its compaction finished meanwhile (the manifest goes last), and
            // the listing may still name the segments it removed. List again.
            guard manifest == nil, attempts < 100 else { break }
            attempts += 1
        }
        var segments: [UInt64] = [], hints: [UInt64] = [], dictionaries: [UInt32] = []
        for name in names.sorted() {
            switch Self.classify(name) {
            case .segment(let id): segments.append(id)
            case .hint(let id): hints.append(id)
            case .dictionary(let id): dictionaries.append(UInt32(id))
            case .leftover: leftovers.append(name)
            case .stray(let reason): strays.append(StrayFile(name: name, reason: reason))
            case .rekeyMarker: hasRekeyMarker = true
            case .manifest, .lock, .encryption, .other: break
            }
        }
        segments.sort()
        if case .valid(let inputs) = manifest {
            let retired = Set(inputs)
            retiredIDs = segments.filter { retired.contains($0) }
            segments.removeAll { retired.contains($0) }
        }
        segmentIDs = segments
        dictionaryIDs = dictionaries.sorted()
        let present = Set(segments), retired = Set(retiredIDs)
        hintedIDs = Set(hints.filter { present.contains($0) })
        orphanHintIDs = hints.filter { !present.contains($0) && !retired.contains($0) }.sorted()
        activeSegmentID = try Self.activeSegment(of: segments, sealed: hintedIDs, directory: self, encryption: encryption, fileSystem: fileSystem)
    }

    // MARK: Names

    private enum Name: Equatable {
        case segment(UInt64), hint(UInt64), dictionary(UInt64), manifest, lock, encryption, rekeyMarker, leftover, stray(String), other
    }

    /// Whether `name` is one a store's own files have (segment, hint, dictionary, `LOCK`,
    /// `COMPACTION`, `ENCRYPTION`, `REKEYED`, a leftover `.tmp` of one of those): what may be deleted
    /// with a whole store.
    package static func isStoreFileName(_ name: String) -> Bool {
        switch classify(name) {
        case .segment, .hint, .dictionary, .manifest, .lock, .encryption, .rekeyMarker, .leftover: true
        case .stray, .other: false
        }
    }

    /// ``holdsStore`` of the directory at `path`, from its names alone (no header is read).
    package static func holdsStore(at path: String, fileSystem: any FileSystem) throws(CaskError) -> Bool {
        let names: [String]
        do { names = try fileSystem.listDirectory(path) } catch {
            throw CaskError.from(error, operation: "list directory", path: path, reading: true)
        }
        return names.contains { if case .segment = classify($0) { true } else { false } }
    }

    /// What a file name in a store directory is.
    private static func classify(_ name: String) -> Name {
        if name == CompactionManifest.fileName { return .manifest }
        if name == SegmentName.lockFile { return .lock }
        if name == EncryptionFile.fileName { return .encryption }
        if name == SegmentName.rekeyMarker { return .rekeyMarker }
        if name.hasSuffix(".tmp") {
            switch classify(String(name.dropLast(4))) {
            case .segment, .hint, .dictionary, .manifest, .lock, .encryption, .rekeyMarker: return .leftover
            case .leftover, .stray, .other: return .other
            }
        }
        let kinds: [(suffix: String, what: String, name: (UInt64) -> Name)] = [
            (SegmentName.segmentExtension, "segment", Name.segment), (SegmentName.hintExtension, "hint file", Name.hint),
            (SegmentName.dictionaryExtension, "dictionary", Name.dictionary),
        ]
        for kind in kinds where name.hasSuffix(kind.suffix) {
            let digits = name.dropLast(kind.suffix.count)
            guard digits.count == 10, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let id = UInt64(digits) else {
                return .stray("not a \(kind.what) name (ten digits, then \(kind.suffix))")
            }
            guard id >= 1, id <= SegmentName.maxID else {
                return .stray("\(kind.what) id \(id) is outside 1...\(SegmentName.maxID)")
            }
            return kind.name(id)
        }
        if name.contains(SegmentName.segmentExtension) || name.contains(SegmentName.hintExtension) || name.contains(SegmentName.dictionaryExtension) {
            return .stray("not a file of the store (only NNNNNNNNNN.cask, NNNNNNNNNN.hint and NNNNNNNNNN.dict are)")
        }
        return .other
    }

    // MARK: The manifest

    /// The largest manifest a compaction writes.
    private static let maxManifestLength = Int64(16 + CompactionManifest.maxInputs * 8 + 4)

    /// The manifest at `manifestPath`, or nil when it no longer exists. Throws when it cannot be
    /// read: only bytes that are not a manifest make it invalid (and then nothing trusts it, and
    /// `recover` removes it), never a read that failed (EACCES, EIO).
    private static func readManifest(_ manifestPath: String, fileSystem: any FileSystem) throws(CaskError) -> Manifest? {
        let bytes: [UInt8]
        do throws(Errno) {
            let file = try fileSystem.openFile(manifestPath, flags: O_RDONLY, mode: 0)
            let size = try fileSystem.fileSize(file.descriptor)
            guard size <= maxManifestLength else { return .invalid(reason: "invalid compaction manifest (\(size) bytes, more than any compaction writes); ignored") }
            var read = [UInt8](repeating: 0, count: Int(size))
            let count = try read.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }
            bytes = Array(read[0..<count])
        } catch {
            if error == .noEntry { return nil }
            throw CaskError.from(error, operation: "read compaction manifest", path: manifestPath, reading: true)
        }
        guard let inputs = bytes.withBytes({ CompactionManifest.decode($0) }) else {
            return .invalid(reason: "invalid compaction manifest; ignored")
        }
        return .valid(inputs: inputs)
    }

    /// Finishes the compaction a valid manifest records, as its compactor would have: removes the
    /// segments it retires (hints first), syncs the directory, removes the manifest, syncs again.
    /// Each step is durable before the next, so a crash part way leaves a manifest to finish again.
    package static func finishCompaction(
        retiring ids: [UInt64], in directory: String, fileSystem: any FileSystem
    ) throws(Errno) {
        for id in ids {
            for name in [SegmentName.hint(id), SegmentName.segment(id)] {
                do { try fileSystem.unlink(directory + "/" + name) } catch where error == .noEntry {}
            }
        }
        try fileSystem.syncDirectory(directory)
        try fileSystem.unlink(directory + "/" + CompactionManifest.fileName)
        try fileSystem.syncDirectory(directory)
    }

    // MARK: The active segment

    /// The segment a writer appends to (see ``activeSegmentID``). Compaction outputs have higher ids
    /// but hold older records, and so a lower base seq.
    /// Throws when a segment cannot be opened or read (deciding without it could make another
    /// segment the active one, whose end a writer's open would then cut); one that a compaction
    /// removed since the listing is left out.
    private static func activeSegment(
        of ids: [UInt64], sealed: Set<UInt64>, directory: StoreDirectory, encryption: StoreEncryption?, fileSystem: any FileSystem
    ) throws(CaskError) -> UInt64? {
        guard let newest = ids.last else { return nil }
        var headers: [(id: UInt64, baseSeq: UInt64?)] = []
        var newestIsTornCreation = false
        for id in ids {
            switch try examineHeader(id, in: directory.path, encryption: encryption, fileSystem: fileSystem) {
            case nil: continue  // gone since the listing
            case .valid(let baseSeq): headers.append((id, baseSeq))
            case .tornCreation:
                headers.append((id, nil))
                // A hint file is written only once a header is whole: with one, this is damage.
                newestIsTornCreation = id == newest && !sealed.contains(id)
            case .damaged: headers.append((id, nil))
            }
        }
        return activeSegment(among: headers, newest: newest, newestIsTornCreation: newestIsTornCreation)
    }

    /// What the choice of the active segment takes from a segment's header.
    package enum HeaderState: Equatable {
        /// Valid, as every reader reads it: this base seq takes part in the choice.
        case valid(baseSeq: UInt64)
        /// Invalid, and the file too short or too empty for a record (FORMAT.md, "Reading a store",
        /// rule 4): a torn creation if the segment is the newest one and has no hint file.
        case tornCreation
        /// Invalid otherwise: damage, which takes no part.
        case damaged
    }

    /// The header of segment `id` in the directory at `path`, judged as every reader judges it
    /// (``SegmentReader/readHeader()``: the same checks, in an encrypted store its authentication
    /// and the segment id it names); nil for a file that is gone. Throws as the open would: for a
    /// header of another format version, a store's key missing, or a read that fails. One read of
    /// the header (and, for an invalid one of at most 301 bytes, of the file).
    package static func examineHeader(
        _ id: UInt64, in path: String, encryption: StoreEncryption?, fileSystem: any FileSystem
    ) throws(CaskError) -> HeaderState? {
        // Read as the active one, so that a header too short or too empty for a record says so.
        try SegmentReader.reading(
            segment: id, at: path + "/" + SegmentName.segment(id), isActive: true, lockHeld: false, encryption: encryption, fileSystem: fileSystem
        ) { (reader, _) throws(CaskError) in try headerState(&reader) }
    }

    /// ``examineHeader(_:in:encryption:fileSystem:)`` through a reader of the segment, made to read
    /// it as the active one (`isActive`), for a caller that holds the file open already.
    package static func headerState(_ reader: inout SegmentReader) throws(CaskError) -> HeaderState {
        let (header, damage) = try reader.readHeader()
        if damage?.kind == .tornTail { return .tornCreation }
        return header.map { .valid(baseSeq: $0.baseSeq) } ?? .damaged
    }

    /// The rule of ``activeSegment``, on the segments' ids and base seqs (nil: a header that is
    /// not valid) and the newest id listed: when its header is invalid, that one if its creation
    /// was torn, else none; otherwise the highest base seq among the valid headers, ties to the
    /// highest id. Also how a backup knows which segment its copy appends to.
    package static func activeSegment(
        among headers: [(id: UInt64, baseSeq: UInt64?)], newest: UInt64, newestIsTornCreation: Bool
    ) -> UInt64? {
        if headers.contains(where: { $0.id == newest && $0.baseSeq == nil }) { return newestIsTornCreation ? newest : nil }
        var best: (baseSeq: UInt64, id: UInt64)?
        for case let (id, baseSeq?) in headers where best.map({ (baseSeq, id) > ($0.baseSeq, $0.id) }) ?? true {
            best = (baseSeq, id)
        }
        return best?.id ?? newest
    }
}
