import Cask

/// `--key-file <file>`: the key of an encrypted store, as every command that opens or reads a
/// store takes it, and the messages for a key file that holds no key.
///
/// A key file is read by the library (``EncryptionKey/init(keyFile:)``): 32 bytes, or 64
/// hexadecimal digits and at most one newline, opened only as a regular file, never through a
/// symbolic link. Everything that keeps a key from being used — a key file missing, a link, not
/// readable or holding no key; no key for an encrypted store, a key for a plain one, the wrong key
/// — exits 1: the store's data is intact, the command could not use it.
enum KeyFile {
    /// For commands that open an existing store.
    static let option = CommandHelp.Option(
        name: "key-file", valueName: "file",
        help: "The key of an encrypted store: a file of 64 hex digits (as 'cask keygen' writes) or 32 bytes. Needed for an encrypted store, refused for one that is not.")

    /// For commands that create the store when <dir> does not exist (put, import, import-defaults).
    static let creatingOption = CommandHelp.Option(
        name: "key-file", valueName: "file",
        help: "The key of an encrypted store: a file of 64 hex digits (as 'cask keygen' writes) or 32 bytes. Needed for an encrypted store, refused for one that is not; a store this command creates is encrypted with it.")

    /// The encryption `--key-file` asks for: `.key` of the key its file holds, `.none` when it is
    /// not given.
    static func encryption(_ arguments: ParsedArguments) throws(ToolError) -> Encryption {
        guard let path = try path(arguments, option: option.name) else { return .none }
        return .key(try key(at: path))
    }

    /// The path given to the option `name`, if it is given.
    static func path(_ arguments: ParsedArguments, option name: String) throws(ToolError) -> String? {
        guard let bytes = arguments.option(name) else { return nil }
        guard !bytes.isEmpty else { throw .usage("--\(name) must name a file") }
        guard let path = String(validating: bytes, as: UTF8.self) else {
            throw .usage("--\(name) is not valid UTF-8: '\(KeyEscaping.escape(bytes))' (\(ParsedArguments.utf8PathsOnly))")
        }
        return path
    }

    /// The key in the file at `path`, or a failure that names the file and says what to do.
    static func key(at path: String) throws(ToolError) -> EncryptionKey {
        do throws(CaskError) { return try EncryptionKey(keyFile: path) } catch {
            switch error {
            case .foreignFile(_, .symbolicLink):
                throw .failure("key file \(path) is a symbolic link; a key file is read only as a regular file, never through a link: name the file itself")
            case .foreignFile:
                throw .failure("key file \(path) is not a regular file (a directory, FIFO, socket or device); name the key file itself")
            case .io(_, _, .noEntry):
                throw .failure("key file \(path) does not exist; check the path ('cask keygen FILE' writes a new key, for a new store)")
            case .notReadable(_, let errno):
                throw .failure("cannot read key file \(path): \(errno); check its permissions")
            default:
                throw .store(error)
            }
        }
    }
}
