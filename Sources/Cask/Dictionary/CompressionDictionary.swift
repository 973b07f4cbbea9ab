#if canImport(Glibc)
import Glibc
#endif

/// One of a store's trained dictionaries, loaded from its file (`NNNNNNNNNN.dict`, FORMAT.md
/// "Dictionary files"). Immutable and shared: every segment that names it, the writer and the
/// compactor use the one object.
package final class CompressionDictionary: Sendable {
    package let id: UInt32
    package let path: String
    package let lz4: LZ4Dictionary
    /// The crc32c of the content, which the headers of the segments that use it repeat.
    package let checksum: UInt32
    /// Payload bytes per value byte it gave on the samples it was measured on (nil: unknown).
    package let ratio: Double?
    /// An encrypted dictionary file's salt, by which segments name it (with its id); nil for a store
    /// that is not encrypted.
    package let salt: [UInt8]?
    /// The dictionary's file, as ``DictionaryCatalog/add(content:ratio:)`` writes it and backups copy it.
    package let fileBytes: [UInt8]

    /// A new dictionary of `content`, and its file: sealed for `encryption` (with a new salt) in an
    /// encrypted store.
    package init(id: UInt32, path: String, content: UnsafeRawBufferPointer, ratio: Double?, encryption: StoreEncryption?) {
        self.id = id
        self.path = path
        lz4 = LZ4Dictionary(content: content)
        checksum = CRC32C.checksum(of: content)
        self.ratio = ratio
        if let encryption {
            (fileBytes, salt) = DictionaryFile.encode(id: id, content: content, ratio: ratio, encryption: encryption)
        } else {
            fileBytes = DictionaryFile.encode(id: id, content: content, ratio: ratio)
            salt = nil
        }
    }

    /// The dictionary a file (`fileBytes`, checked) holds.
    private init(id: UInt32, path: String, decoded: DictionaryFile.Decoded, ratio: Double?, fileBytes: [UInt8]) {
        self.id = id
        self.path = path
        lz4 = decoded.content.withUnsafeBytes { LZ4Dictionary(content: $0) }
        checksum = CRC32C.checksum(of: decoded.content)
        self.ratio = ratio
        salt = decoded.salt
        self.fileBytes = fileBytes
    }

    /// Reads and checks dictionary `id` of the store in `directory` (opening it with `encryption`,
    /// the store's, in an encrypted store). A file that is missing, is not a regular file, cannot be
    /// read or fails its checks is `.failure` with the reason.
    package static func load(
        id: UInt32, directory: String, encryption: StoreEncryption?, fileSystem: any FileSystem
    ) -> Result<CompressionDictionary, Unavailable> {
        let path = directory + "/" + SegmentName.dictionary(UInt64(id))
        let file: OpenFile
        do {
            file = try fileSystem.openFile(path, flags: O_RDONLY, mode: 0)
        } catch {
            let reason = error == .noEntry ? "the file is missing" : "it cannot be opened (\(error))"
            return .failure(Unavailable(id: id, path: path, reason: reason))
        }
        let size: Int64
        do { size = try fileSystem.fileSize(file.descriptor) } catch {
            return .failure(Unavailable(id: id, path: path, reason: "fstat failed (\(error))"))
        }
        guard size <= Int64(DictionaryFile.encryptedHeaderLength + DictionaryFile.maxContentLength + FileCipher.tagLength) else {
            return .failure(Unavailable(id: id, path: path, reason: "the file is \(size) bytes, more than a dictionary can be"))
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let count: Int
        do {
            count = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }
        } catch {
            return .failure(Unavailable(id: id, path: path, reason: "it cannot be read (\(error))"))
        }
        let contents = Array(bytes[0..<count])
        return contents.withUnsafeBytes { raw in
            switch DictionaryFile.decode(raw, expectedID: id, encryption: encryption) {
            case .success(let decoded):
                .success(CompressionDictionary(id: id, path: path, decoded: decoded, ratio: DictionaryFile.ratio(raw), fileBytes: contents))
            case .failure(let reason): .failure(Unavailable(id: id, path: path, reason: reason.description))
            }
        }
    }

    /// A dictionary a segment names that cannot be used: its records that need it cannot be read.
    package struct Unavailable: Error, Equatable, Sendable {
        package var id: UInt32
        package var path: String
        package var reason: String
    }
}

/// The dictionary a segment's header names, as the segment's readers find it.
package enum SegmentDictionary: Sendable {
    /// The header names none (a version 1 segment).
    case none
    case loaded(CompressionDictionary)
    /// The header names one that is missing or damaged.
    case unavailable(CompressionDictionary.Unavailable)

    package var id: UInt32 {
        switch self {
        case .none: 0
        case .loaded(let dictionary): dictionary.id
        case .unavailable(let unavailable): unavailable.id
        }
    }

    package var loaded: CompressionDictionary? {
        if case .loaded(let dictionary) = self { dictionary } else { nil }
    }

    /// Why a record flagged ``RecordFlags/dictionary`` in this segment cannot be expanded, or nil
    /// when it can.
    package var problem: String? {
        switch self {
        case .none: "the record needs a dictionary, and its segment names none"
        case .loaded: nil
        case .unavailable(let unavailable): "the record needs dictionary \(unavailable.id) (\(unavailable.path)), which cannot be used: \(unavailable.reason)"
        }
    }
}
