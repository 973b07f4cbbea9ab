/// Everything that can go wrong in Cask, each case naming what and where.
///
/// The `description` of each case is a sentence a user can act on; tests pin the exact text.
public enum CaskError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key was empty.
    case emptyKey
    /// A key was longer than ``Limits/maxKeyLength``. Nothing was read or written.
    case keyTooLong(length: Int, limit: Int)
    /// A value was larger than the store's limit. Nothing was written.
    case valueTooLarge(length: Int, limit: Int)
    /// The store at `path` was closed; open it again.
    case closed(path: String)
    /// A write was attempted on the store at `path`, opened read-only.
    case readOnly(path: String)
    /// The store directory does not exist and `createIfMissing` was false.
    case directoryMissing(path: String)
    /// The store directory could not be created: its parent does not exist (an open creates the
    /// store's directory, not its parents).
    case parentMissing(path: String, parent: String)
    /// The store directory (or a file in it) cannot be written.
    case notWritable(path: String, errno: Errno)
    /// Another process holds the store's write lock.
    case locked(path: String, holderPID: Int32?)
    /// The directory exists but holds no store (no segment file), and the call makes none (a
    /// writable open with `createIfMissing` false, `rekey`): nothing was changed there.
    case notAStore(path: String)
    /// The store is already open for writing in this process, by another `CaskStore` (the lock is
    /// per open, not per process): use that one, or close it first.
    case alreadyOpen(path: String)
    /// The disk (or quota) is full. The record being written was rolled back; the store stays
    /// readable and accepts writes again once space is freed.
    case diskFull(path: String)
    /// The store directory (or a file in it) cannot be read: its permissions do not let this
    /// process read it.
    case notReadable(path: String, errno: Errno)
    /// The store reached a limit of its format (`reason` says which and what to do); nothing is
    /// damaged, and what it holds stays readable.
    case limitReached(path: String, reason: String)
    /// A name in the store directory is a symbolic link, not a regular file (a directory, FIFO,
    /// socket or device), or a file to write with other hard links (`errno` says which:
    /// ``Errno/symbolicLink``, ``Errno/notRegularFile``, ``Errno/hardLinked``). Cask opens none of
    /// these, so nothing outside the store is read or written through them.
    case foreignFile(path: String, errno: Errno)
    /// An I/O call failed.
    case io(operation: String, path: String, errno: Errno)
    /// Making data durable failed. Data written since the last successful sync may be lost, so the
    /// store refuses further writes and syncs; reopen it to recover what the disk really holds.
    case syncFailed(path: String, errno: Errno)
    /// A record failed validation (checksum, lengths, key mismatch).
    case corruptRecord(path: String, offset: Int64, reason: String)
    /// A file was written by a newer, incompatible version of Cask (or is not a Cask file).
    case unsupportedFormat(path: String, version: UInt16)
    /// A file in the store directory is not a valid Cask file.
    case corruptFile(path: String, reason: String)
    /// A value given to the object API could not be encoded (its `encode(to:)` threw, or the coder
    /// refused it) at `codingPath` (empty: the value itself). Nothing was written.
    case objectEncodingFailed(key: String, type: String, codingPath: String, reason: String)
    /// The value of `key` does not decode as `type`: `codingPath` says where in the value (empty: the
    /// value itself), `reason` what was found there.
    case objectDecodingFailed(key: String, type: String, codingPath: String, reason: String)
    /// The encryption key given is not a key (`reason` says why: its length, a key file's content).
    /// Nothing was read or written.
    case invalidEncryptionKey(reason: String)
    /// The store (or a file in it, `path`) is encrypted, and it was opened without a key.
    case encryptionKeyRequired(path: String)
    /// The key given is not the key the store was encrypted with (its `ENCRYPTION` file's key
    /// check fails). Nothing was read or written.
    case wrongKey(path: String)
    /// A key was given for a store that is not encrypted. Nothing was read or written.
    case notEncrypted(path: String)
    /// The store's encryption cannot be used by this process (`reason`: AES-256-GCM on a CPU
    /// without AES-NI, libsodium failing to start).
    case encryptionUnavailable(path: String, reason: String)
    /// An option or argument outside what the store accepts (`name` says which, `reason` what it
    /// must be). Nothing was read or written.
    case invalidArgument(name: String, reason: String)

    public var description: String {
        switch self {
        case .emptyKey:
            "key is empty; keys are 1 to \(Limits.maxKeyLength) bytes"
        case .keyTooLong(let length, let limit):
            "key is \(length) bytes, over the limit of \(limit) bytes (keys are 1 to \(limit) bytes); nothing was read or written"
        case .valueTooLarge(let length, let limit):
            "value is \(length) bytes, over the limit of \(limit) bytes; nothing was written"
        case .closed(let path):
            "store \(path) is closed; open it again to use it"
        case .readOnly(let path):
            "store \(path) is open read-only; open it for writing to change it"
        case .directoryMissing(let path):
            "store directory \(path) does not exist; check the path (a writable open with createIfMissing, the default, creates it; a read-only one never does)"
        case .parentMissing(let path, let parent):
            "cannot create store directory \(path): its parent \(parent) does not exist (an open creates the store's directory, not its parents)"
        case .notWritable(let path, let errno):
            "cannot write \(path): \(errno); check its permissions, or open an existing store read-only"
        case .locked(let path, let pid):
            if let pid {
                "store \(path) is locked by another process (pid \(pid)); open it read-only or close the other process"
            } else {
                "store \(path) is locked by another process; open it read-only or close the other process"
            }
        case .diskFull(let path):
            "disk full while writing \(path); the write was rolled back, free space and retry"
        case .limitReached(let path, let reason):
            "\(path): \(reason)"
        case .notReadable(let path, let errno):
            "cannot read \(path): \(errno); check its permissions (a store's files are readable by their owner only)"
        case .foreignFile(let path, let errno):
            "\(path) is \(Self.foreignKind(errno)); Cask opens only regular files of its own in a store and never follows links, so it did not open it: move it out of the store directory, and check who else can write there"
        case .io(let operation, let path, let errno):
            "\(operation) failed on \(path): \(errno)"
        case .syncFailed(let path, let errno):
            "fsync failed on \(path): \(errno); recent writes may not be durable, the store refuses writes until reopened"
        case .corruptRecord(let path, let offset, let reason):
            "corrupt record in \(path) at offset \(offset): \(reason)"
        case .unsupportedFormat(let path, let version):
            "\(path) has format version \(version), which this Cask (formats 1 to 4) cannot read"
        case .corruptFile(let path, let reason):
            "\(path) is not a valid Cask file: \(reason)"
        case .objectEncodingFailed(let key, let type, let codingPath, let reason):
            "cannot encode \(type) for key \"\(key)\"\(codingPath.isEmpty ? "" : " at \(codingPath)"): \(reason); nothing was written"
        case .objectDecodingFailed(let key, let type, let codingPath, let reason):
            "value of key \"\(key)\" does not decode as \(type)\(codingPath.isEmpty ? "" : " at \(codingPath)"): \(reason); read it with the type and coder that wrote it, or overwrite it"
        case .invalidEncryptionKey(let reason):
            "invalid encryption key: \(reason); nothing was read or written"
        case .encryptionKeyRequired(let path):
            "\(path) is encrypted; open the store with its key (Options.encryption = .key(...), or --key-file FILE for the cask tool)"
        case .wrongKey(let path):
            "the key given is not the key store \(path) was encrypted with (the key check in its ENCRYPTION file fails); nothing was read or written"
        case .notEncrypted(let path):
            "store \(path) is not encrypted and a key was given; open it without a key, or encrypt it with 'cask rekey \(path) --new-key-file FILE'"
        case .encryptionUnavailable(let path, let reason):
            "cannot open the encrypted store \(path): \(reason)"
        case .notAStore(let path):
            "\(path) holds no Cask store (no segment file); nothing was changed"
        case .alreadyOpen(let path):
            "store \(path) is already open for writing in this process: use that CaskStore, or close it before opening another"
        case .invalidArgument(let name, let reason):
            "\(name) \(reason)"
        }
    }

    /// Maps a failed I/O call to the error users should see; `reading`: the call only reads (a
    /// permission error is then ``notReadable(path:errno:)``, not ``notWritable(path:errno:)``).
    static func from(_ errno: Errno, operation: String, path: String, reading: Bool = false) -> CaskError {
        switch errno {
        case .noSpace, .quotaExceeded: .diskFull(path: path)
        case .permissionDenied where reading: .notReadable(path: path, errno: errno)
        case .permissionDenied, .readOnlyFileSystem: .notWritable(path: path, errno: errno)
        case .symbolicLink, .notRegularFile, .hardLinked: .foreignFile(path: path, errno: errno)
        default: .io(operation: operation, path: path, errno: errno)
        }
    }

    private static func foreignKind(_ errno: Errno) -> String {
        switch errno {
        case .symbolicLink: "a symbolic link (or a loop of them)"
        case .hardLinked: "a file with other hard links"
        case .notRegularFile: "not a regular file (a directory, FIFO, socket or device)"
        default: "not a file Cask can open (\(errno))"
        }
    }
}
