import Cask

/// Why a command stopped. Printed as `Error: …` on standard error.
enum ToolError: Error {
    /// A bad command line: printed with the command's usage, exit 64.
    case usage(String)
    /// Exit 1 with this message.
    case failure(String)
    /// Exit 65 with this message: the input given to the command is malformed (`import`).
    case data(String)
    /// A store error: exit 65 when it is damage on disk or a format this Cask cannot read, 1 otherwise
    /// (a key that cannot be used included: see ``KeyFile``).
    case store(CaskError)

    var message: String {
        switch self {
        case .usage(let message), .failure(let message), .data(let message): message
        // The library's advice names an option; the tool's user has none to set.
        case .store(.directoryMissing(let path)): "store directory \(path) does not exist; check the path (put, import and import-defaults create a store where there is none)"
        case .store(.encryptionKeyRequired(let path)): "\(path) is encrypted; give the store's key with --key-file <file>"
        case .store(.notEncrypted(let path)):
            "store \(path) is not encrypted and --key-file was given; leave --key-file out, or encrypt the store with 'cask rekey \(path) --new-key-file <file>'"
        case .store(let error): error.description
        }
    }

    var exitCode: ExitCode {
        switch self {
        case .usage: .usage
        case .failure: .failure
        case .data: .dataError
        case .store(.corruptRecord), .store(.corruptFile), .store(.unsupportedFormat): .dataError
        case .store: .failure
        }
    }
}

extension CaskError {
    /// Runs `body`, wrapping a ``CaskError`` as a ``ToolError``.
    static func wrap<R>(_ body: () throws(CaskError) -> R) throws(ToolError) -> R {
        do { return try body() } catch { throw ToolError.store(error) }
    }
}
