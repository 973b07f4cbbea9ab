import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A store's dictionaries: each loaded once, however many segments name it, and the one the store
/// compresses new records with (``current``). Thread-safe.
///
/// At open the current dictionary is the newest (highest id) dictionary file that loads. A newly
/// trained one is written durably (``add(content:ratio:)``) before any segment names it and becomes
/// current; a dictionary file is deleted only once no segment names it and it is not current
/// (``removeUnused(named:)``).
package final class DictionaryCatalog: Sendable {
    package let directory: String
    private let fileSystem: any FileSystem
    /// The store's encryption: dictionary files are sealed with it (nil: not encrypted).
    package let encryption: StoreEncryption?
    private struct State {
        var loaded: [UInt32: SegmentDictionary] = [:]
        var current: CompressionDictionary?
        /// The highest id of any dictionary file seen or written.
        var highestID: UInt32 = 0
    }
    private let state = Mutex(State())

    /// `knownIDs`: the dictionary files the directory listing found.
    package init(directory: String, fileSystem: any FileSystem, encryption: StoreEncryption?, knownIDs: [UInt32] = []) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.encryption = encryption
        state.withLock { $0.highestID = knownIDs.max() ?? 0 }
    }

    /// Notes dictionary files a listing found, so that a new dictionary gets an id none of them has.
    package func noteListed(_ ids: [UInt32]) {
        state.withLock { $0.highestID = max($0.highestID, ids.max() ?? 0) }
    }

    /// Loads the newest dictionary that loads, of `ids`, as the current one.
    package func chooseCurrent(among ids: [UInt32]) {
        for id in ids.sorted(by: >) {
            if case .loaded(let dictionary) = resolve(id) {
                state.withLock { $0.current = dictionary }
                return
            }
        }
    }

    /// The dictionary new records are compressed with; nil when the store has none yet.
    package var current: CompressionDictionary? { state.withLock { $0.current } }

    /// What a segment whose header names `id` reads its records with: loaded from its file the first
    /// time (0: none). A file that cannot be used stays unavailable for this catalog's life.
    package func resolve(_ id: UInt32) -> SegmentDictionary {
        guard id != 0 else { return .none }
        if let known = state.withLock({ $0.loaded[id] }) { return known }
        let found: SegmentDictionary
        switch CompressionDictionary.load(id: id, directory: directory, encryption: encryption, fileSystem: fileSystem) {
        case .success(let dictionary): found = .loaded(dictionary)
        case .failure(let unavailable): found = .unavailable(unavailable)
        }
        return state.withLock { state in
            if let raced = state.loaded[id] { return raced }
            state.loaded[id] = found
            state.highestID = max(state.highestID, id)
            return found
        }
    }

    /// The dictionary the header of the segment open as `fd` names; `.none` when the header cannot
    /// be read or is invalid (whoever reads the segment reports that).
    package func dictionary(ofSegment fd: Int32, path: String) -> SegmentDictionary {
        guard case .success(let (header, _))? = try? SegmentHeader.read(fd: fd, path: path, encryption: encryption, fileSystem: fileSystem)
        else { return .none }
        return dictionary(of: header)
    }

    /// The dictionary `header` names, checked against the checksum it gives for it (an encrypted
    /// header: the salt): a file that holds another dictionary under the id is unavailable to the segment.
    package func dictionary(of header: SegmentHeader) -> SegmentDictionary {
        let found = resolve(header.dictionaryID)
        if let sealing = header.sealing {
            guard case .loaded(let dictionary) = found, dictionary.salt != sealing.dictionarySalt else { return found }
            return .unavailable(.init(
                id: dictionary.id, path: dictionary.path, reason: "it is not the dictionary the segment was written with (another salt)"))
        }
        guard case .loaded(let dictionary) = found, dictionary.checksum != header.dictionaryChecksum else { return found }
        return .unavailable(.init(
            id: dictionary.id, path: dictionary.path,
            reason: "its content (crc32c 0x\(String(dictionary.checksum, radix: 16))) is not the dictionary the segment was written with (crc32c 0x\(String(header.dictionaryChecksum, radix: 16)))"))
    }

    /// Writes `content` as a new dictionary file, durably (a temporary file, synced, renamed without
    /// replacing anything, the directory synced), and makes it current. Thread-safe: each call takes
    /// an id of its own (one whose write fails is not reused).
    package func add(content: [UInt8], ratio: Double?) throws(CaskError) -> CompressionDictionary {
        let id = state.withLock { state -> UInt32 in
            state.highestID = state.highestID == UInt32.max ? state.highestID : state.highestID + 1
            return state.highestID
        }
        guard UInt64(id) <= SegmentName.maxID else {
            throw CaskError.limitReached(path: directory, reason: "dictionary ids are exhausted (limit \(SegmentName.maxID))")
        }
        let path = directory + "/" + SegmentName.dictionary(UInt64(id))
        let dictionary = content.withBytes { CompressionDictionary(id: id, path: path, content: $0, ratio: ratio, encryption: encryption) }
        do throws(Errno) {
            try fileSystem.writeFileAtomically(path, directory: directory, bytes: dictionary.fileBytes, replacing: false)
        } catch {
            throw CaskError.from(error, operation: "write dictionary", path: path)
        }
        state.withLock { state in
            state.loaded[id] = .loaded(dictionary)
            state.highestID = max(state.highestID, id)
            state.current = dictionary
        }
        return dictionary
    }

    /// The ids of the dictionaries loaded (or found unusable) so far.
    package var loadedIDs: [UInt32] { state.withLock { Array($0.loaded.keys) } }

    /// Deletes the dictionary files of `listed` that no segment names (`named`), that are not
    /// current and that the writer is not about to name (`keeping`: its dictionary for new
    /// segments), then syncs the directory. For a writer, after a compaction retired segments or at
    /// open; a file that is already gone is no error.
    package func removeUnused(listed: [UInt32], named: Set<UInt32>, keeping: UInt32? = nil) throws(CaskError) {
        let currentID = current?.id
        let unused = listed.filter { !named.contains($0) && $0 != currentID && $0 != keeping }
        guard !unused.isEmpty else { return }
        do throws(Errno) {
            for id in unused {
                do { try fileSystem.unlink(directory + "/" + SegmentName.dictionary(UInt64(id))) } catch where error == .noEntry {}
                _ = state.withLock { $0.loaded.removeValue(forKey: id) }
            }
            try fileSystem.syncDirectory(directory)
        } catch {
            throw CaskError.from(error, operation: "delete unused dictionaries", path: directory)
        }
    }
}
