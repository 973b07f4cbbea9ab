#if canImport(Glibc)
import Glibc
#endif

extension StoreEncryption {
    /// The encryption of the store in `directory`, as `requested`, checked against its `ENCRYPTION`
    /// file; nil for a store that is not encrypted (opened without a key). With `creating` (a writer,
    /// holding the store's lock), a store without segments that is opened with a key becomes an
    /// encrypted one: its `ENCRYPTION` file is written durably before anything else.
    ///
    /// Throws ``CaskError/encryptionKeyRequired(path:)`` for an encrypted store opened without a
    /// key, ``CaskError/wrongKey(path:)`` for another key, ``CaskError/notEncrypted(path:)`` for a
    /// store with segments that are not encrypted opened with one, ``CaskError/corruptFile(path:reason:)``
    /// for a damaged or missing `ENCRYPTION` file of a store whose segments are encrypted, and
    /// ``CaskError/encryptionUnavailable(path:reason:)`` when this CPU cannot run its algorithm.
    package static func open(
        directory: String, requested: Encryption, creating: Bool, fileSystem: any FileSystem
    ) throws(CaskError) -> StoreEncryption? {
        if let length = requested.invalidKeyLength {
            throw CaskError.invalidEncryptionKey(reason: "a key is \(EncryptionKey.length) bytes, this one is \(length)")
        }
        let path = directory + "/" + EncryptionFile.fileName
        let names: [String]
        do throws(Errno) { names = try fileSystem.listDirectory(directory) } catch {
            throw CaskError.from(error, operation: "list directory", path: directory, reading: true)
        }
        let segments = names.filter { $0.hasSuffix(SegmentName.segmentExtension) }
        guard names.contains(EncryptionFile.fileName), let bytes = try readFile(path, fileSystem: fileSystem) else {
            guard let key = requested.key else { return nil }
            if holdsEncryptedSegment(segments, in: directory, fileSystem: fileSystem) {
                throw CaskError.corruptFile(
                    path: path, reason: "the file is missing while the store's segments are encrypted; 'cask recover --key-file FILE' writes it again")
            }
            if !segments.isEmpty { throw CaskError.notEncrypted(path: directory) }
            let algorithm = requested.algorithm ?? .preferred
            guard algorithm.isAvailable else { throw unavailable(algorithm, directory: directory) }
            let storeID = FileCipher.randomSalt()
            let file = EncryptionFile.encode(key: key, algorithm: algorithm, storeID: storeID)
            if creating {
                do throws(Errno) {
                    // An earlier open that crashed while writing it left its temporary file (the
                    // writer holds the lock, and the store has no segment: nobody else's).
                    if names.contains(EncryptionFile.fileName + ".tmp") { try fileSystem.unlink(path + ".tmp") }
                    try fileSystem.writeFileAtomically(path, directory: directory, bytes: file, replacing: false)
                } catch {
                    throw CaskError.from(error, operation: "write", path: path)
                }
            }
            return StoreEncryption(key: key, algorithm: algorithm, storeID: storeID, identityFile: file)
        }
        return try bytes.withBytes { (raw) throws(CaskError) in
            let contents: EncryptionFile.Contents
            switch EncryptionFile.decode(raw) {
            case .success(let decoded): contents = decoded
            case .failure(.damaged(let reason)):
                throw CaskError.corruptFile(path: path, reason: "\(reason); 'cask recover --key-file FILE' writes it again from the segments")
            case .failure(.unsupported(let reason)):
                throw CaskError.corruptFile(path: path, reason: "\(reason), written by a newer Cask")
            }
            guard let key = requested.key else { throw CaskError.encryptionKeyRequired(path: directory) }
            guard contents.algorithm.isAvailable else { throw unavailable(contents.algorithm, directory: directory) }
            guard let encryption = EncryptionFile.open(raw, contents: contents, key: key) else { throw CaskError.wrongKey(path: directory) }
            return encryption
        }
    }

    private static func unavailable(_ algorithm: EncryptionAlgorithm, directory: String) -> CaskError {
        .encryptionUnavailable(
            path: directory,
            reason: Sodium.ready
                ? "it is sealed with \(algorithm), which libsodium runs only on CPUs with AES-NI; on a machine that has it, rewrite it with XChaCha20-Poly1305 ('cask rekey \(directory) --key-file FILE --new-key-file FILE --algorithm xchacha20poly1305')"
                : "libsodium failed to start")
    }

    /// The bytes of the file at `path` (at most one more than an `ENCRYPTION` file), or nil when there is none.
    private static func readFile(_ path: String, fileSystem: any FileSystem) throws(CaskError) -> [UInt8]? {
        let file: OpenFile
        do { file = try fileSystem.openFile(path, flags: O_RDONLY, mode: 0) } catch {
            if error == .noEntry { return nil }
            throw CaskError.from(error, operation: "open", path: path, reading: true)
        }
        var bytes = [UInt8](repeating: 0, count: EncryptionFile.length + 1)
        let count: Int
        do { count = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) } } catch {
            throw CaskError.from(error, operation: "read", path: path, reading: true)
        }
        return Array(bytes[0..<count])
    }

    /// Whether one of the segment files `names` of `directory` has an encrypted header's version (3),
    /// checksum unchecked.
    private static func holdsEncryptedSegment(_ names: [String], in directory: String, fileSystem: any FileSystem) -> Bool {
        for name in names {
            guard let file = try? fileSystem.openFile(directory + "/" + name, flags: O_RDONLY, mode: 0) else { continue }
            var header = [UInt8](repeating: 0, count: 10)
            let read = (try? header.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }) ?? 0
            if read == 10, header[0..<8].elementsEqual(SegmentHeader.magic),
               header.withUnsafeBytes({ $0.readLittleEndian(at: 8, as: UInt16.self) }) == SegmentHeader.versionEncrypted {
                return true
            }
        }
        return false
    }
}

extension StoreEncryption {
    /// The store's encryption, read from the first segment of `directory` whose header is authentic
    /// under `key` (its tag holds: its store id and algorithm were written by a holder of the key),
    /// with a new `ENCRYPTION` file for it (``identityFile``, not written); nil when no segment's is.
    /// For a repair whose `ENCRYPTION` file is missing or damaged.
    package static func recoverIdentity(directory: String, key: EncryptionKey, fileSystem: any FileSystem) -> StoreEncryption? {
        guard let names = try? fileSystem.listDirectory(directory) else { return nil }
        for name in names.sorted() where SegmentName.segmentID(fromFileName: name) != nil {
            guard let file = try? fileSystem.openFile(directory + "/" + name, flags: O_RDONLY, mode: 0) else { continue }
            var bytes = [UInt8](repeating: 0, count: SegmentHeader.encryptedLength)
            let read = (try? bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }) ?? 0
            guard read == bytes.count, bytes[0..<8].elementsEqual(SegmentHeader.magic) else { continue }
            let found: StoreEncryption? = bytes.withUnsafeBytes { raw in
                guard raw.readLittleEndian(at: 8, as: UInt16.self) == SegmentHeader.versionEncrypted,
                      CRC32C.checksum(of: UnsafeRawBufferPointer(rebasing: raw[0..<104])) == raw.readLittleEndian(at: 104, as: UInt32.self),
                      let algorithm = EncryptionAlgorithm(rawValue: raw.readLittleEndian(at: 12, as: UInt16.self)), algorithm.isAvailable
                else { return nil }
                let storeID = Array(raw[40..<56])
                let cipher = FileCipher(algorithm: algorithm, key: key.storage, salt: UnsafeRawBufferPointer(rebasing: raw[56..<72]))
                guard cipher.verify(tag: UnsafeRawBufferPointer(rebasing: raw[88..<104]), authenticating: UnsafeRawBufferPointer(rebasing: raw[0..<88]), number: 0)
                else { return nil }
                return StoreEncryption(
                    key: key, algorithm: algorithm, storeID: storeID,
                    identityFile: EncryptionFile.encode(key: key, algorithm: algorithm, storeID: storeID))
            }
            if let found { return found }
        }
        return nil
    }
}
