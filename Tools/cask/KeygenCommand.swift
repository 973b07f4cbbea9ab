import Cask
#if canImport(Glibc)
import Glibc
#endif

/// `cask keygen <file>`
struct KeygenCommand: Subcommand {
    static let help = CommandHelp(
        name: "keygen",
        abstract: "Write a new random encryption key to a new file.",
        discussion: [
            "Writes 32 random bytes from the operating system's generator, as 64 hexadecimal digits and a newline, to <file>: a new file, mode 0600 (its owner reads and writes it, no one else), synced with its directory before the command exits 0. Prints nothing; on failure nothing is left at <file>.",
            "Never replaces anything: when <file> exists, or is a symbolic link (even one to nothing), the command refuses and exits 1, since a store encrypted with the key a file held cannot be read without it. It also refuses a <file> in a store's directory (one holding a segment or an ENCRYPTION file): whoever has a copy of the store would have its key.",
            "Give the file to --key-file: 'cask put <dir> <key> --key-file <file>' creates an encrypted store, 'cask rekey <dir> --new-key-file <file>' encrypts a store or changes its key. Keep the key away from the store (not in its directory) and back it up: whoever has it can read the store, and without it no one can.",
        ],
        arguments: [.init(name: "file", help: "The key file to create. It must not exist.")])

    let path: String

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        path = try arguments.path("file")
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        if let storeFile = storeFile(besides: path) {
            throw .failure("key file \(path) would be in a store's directory (it holds \(storeFile)): whoever copies the store would have its key; name a file outside it")
        }
        // O_EXCL: a new file or nothing; with O_CREAT it follows no link, dangling or not.
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw refusal(errno) }
        do throws(ToolError) {
            try write(EncryptionKey.random().hexKeyFile, to: fd)
        } catch {
            close(fd)
            unlink(path)
            throw error
        }
        close(fd)
        return .success
    }

    /// A segment or `ENCRYPTION` file in the directory that would hold `path`, if there is one: the
    /// directory is a store's. Nil when the directory cannot be listed (the create then says why).
    private func storeFile(besides path: String) -> String? {
        let parent = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        guard let directory = opendir(parent.isEmpty ? "/" : parent) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name == EncryptionFile.fileName || (name.hasSuffix(".cask") && StoreDirectory.isStoreFileName(name)) { names.append(name) }
        }
        return names.min()
    }

    /// Writes `text` to the new file `fd`, makes its mode exactly 0600 (the umask may have taken
    /// bits away), and syncs it and the directory that holds its name.
    private func write(_ text: String, to fd: Int32) throws(ToolError) {
        guard fchmod(fd, 0o600) == 0 else { throw failure("cannot set its mode to 0600", errno) }
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            if written < 0 {
                if errno == EINTR { continue }
                throw failure("cannot write it", errno)
            }
            done += written
        }
        guard fsync(fd) == 0 else { throw failure("cannot sync it", errno) }
        let parent = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let directory = open(parent.isEmpty ? "/" : parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw failure("cannot open its directory to sync it", errno) }
        defer { close(directory) }
        guard fsync(directory) == 0 else { throw failure("cannot sync its directory", errno) }
    }

    private func failure(_ what: String, _ code: Int32) -> ToolError {
        .failure("cannot write key file \(path): \(what): \(String(cString: strerror(code))); nothing was left at \(path)")
    }

    /// Why `open` refused to create the file, and what to do.
    private func refusal(_ code: Int32) -> ToolError {
        var info = stat()
        if code == EEXIST && lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK {
            return .failure("key file \(path) is a symbolic link; keygen neither writes through a link nor replaces one: name a new file")
        }
        if code == EEXIST {
            return .failure("key file \(path) exists; keygen never replaces a file (a store encrypted with the key it holds would be lost): name a new file")
        }
        return .failure("cannot create key file \(path): \(String(cString: strerror(code)))")
    }
}
