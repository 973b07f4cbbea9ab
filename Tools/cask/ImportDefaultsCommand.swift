import Cask
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cask import-defaults <dir> <plist> [--prefix <p>] [--coder <c>] [--json] [--key-file <file>]`
struct ImportDefaultsCommand: Subcommand {
    static let help = CommandHelp(
        name: "import-defaults",
        abstract: "Import the entries of a property-list file.",
        discussion: [
            "Reads a property list, XML (UTF-8) or binary (bplist00), whose top level is a dictionary, and stores each top-level entry under the key <prefix><name> as its Swift value, exactly as store.set(value, forKey: key) does with the object coder (binary unless --coder names another; a store does not record its coder, so open it with objects.coder set to the same one). That value is a Bool, Int, Double, String, Date or Data, or an array or a [String: T] dictionary of one such type, nested; typed keys and store.get(T.self, forKey: key) of that type read it back: <true/> as a Bool, an <integer> as an Int (or a smaller integer type that holds it), an <array> of <string>s as a [String]. An empty array or dictionary reads as one of any element type.",
            "An entry with an array or dictionary whose values are not all of one kind (a string beside an integer, an integer beside a real) has no such Swift type: it is stored as a PropertyListValue, read with store.get(PropertyListValue.self, forKey: key), and listed in the output with the container that mixes kinds. A PropertyListValue keeps every kind exactly, a boolean never turning into a number.",
            "The reader is Cask's own and strict: a file that is not a well-formed XML or binary property list with a dictionary at the top exits 65 and imports nothing, the message naming the place (line and column, or object and byte) and the cause. That includes invalid base64 in <data>, a dictionary key given twice, a set or a keyed-archiver UID in a binary list, a reference cycle, and OpenStep (text) property lists, which are not read.",
            "Every entry is written in one atomic batch: after a crash, all of them are in the store or none. An entry that cannot be stored is skipped and reported with the reason (an integer outside Int's range, arrays and dictionaries nested more than \(PropertyListReader.maxNesting) deep, a key over 65535 bytes, a value over the store's limit, a real that JSON cannot hold, and with --coder plist a bare string, number, boolean or date, which PropertyListEncoder stores only inside an array or a dictionary); the command then exits 65, having imported the others.",
            "<plist> may be a pipe or a FIFO, read to its end; at most \(maxFileSize >> 20) MiB are read. Creates the store if <dir> does not exist and there is something to import (encrypted, when --key-file is given), and takes its lock, so it fails (exit 1) while another process has the store open for writing. Everything is on disk (fdatasync) when the command exits.",
        ],
        arguments: [
            StoreAccess.directoryArgument,
            .init(name: "plist", help: "The property-list file (or pipe) to import."),
        ],
        options: [
            .init(name: "prefix", valueName: "p", help: "Put <p> before each entry's name to make its key (default: none)."),
            .init(name: "coder", valueName: "c", help: "The object coder <c> for the values: binary (the default, as the store's), json or plist."),
            StoreAccess.jsonFlag,
            KeyFile.creatingOption,
        ])

    let directory: String
    let file: String
    let prefix: String
    let coder: ObjectCoder
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        json = arguments.flag("json")
        file = try arguments.path("plist")
        if let bytes = arguments.option("prefix") {
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw .usage("--prefix is not valid UTF-8: '\(KeyEscaping.escape(bytes))'")
            }
            prefix = text
        } else {
            prefix = ""
        }
        switch arguments.option("coder").map({ String(decoding: $0, as: UTF8.self) }) {
        case nil, "binary"?: coder = .binary
        case "json"?: coder = .json
        case "plist"?: coder = .propertyList
        case let other?: throw .usage("--coder must be binary, json or plist, not '\(KeyEscaping.escape(Array(other.utf8)))'")
        }
        encryption = try KeyFile.encryption(arguments)
    }

    /// An entry of the report: a skipped one and why, or one stored as a PropertyListValue and why.
    private struct EntryReason: Encodable {
        var name: String
        var reason: String
    }

    private struct Report: Encodable {
        var directory: String
        var file: String
        var coder: String
        var prefix: String
        var imported: Int
        /// The imported entries stored as a `PropertyListValue`, and the container that mixes kinds.
        var propertyListValues: [EntryReason]
        var skipped: [EntryReason]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let entries = try Self.readDictionary(file)
        let existed = FileManager.default.fileExists(atPath: directory)
        let maxValueSize = CaskStore.Options().maxValueSize
        var batch = WriteBatch()
        var skipped: [EntryReason] = []
        var mixed: [EntryReason] = []
        for (name, entry) in entries.sorted(by: { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }) {
            let key = Array((prefix + name).utf8)
            let value: PropertyListValue
            let bytes: [UInt8]
            var mixedKinds: PropertyListValue.ConversionError?
            do {
                if key.isEmpty { throw Skip(reason: CaskError.emptyKey.description) }
                if key.count > Limits.maxKeyLength {
                    throw Skip(reason: "key is \(key.count) bytes, over the limit of \(Limits.maxKeyLength) bytes")
                }
                switch entry {
                case .success(let read): value = read
                case .failure(let error): throw Skip(reason: "\(error)")
                }
                // What `store.set` writes for the Swift value; the value itself when it has none.
                let typed: any Codable & Sendable
                do { typed = try value.typedValue() } catch {
                    mixedKinds = error
                    typed = value
                }
                do { bytes = try coder.encode(typed) } catch {
                    if coder == .propertyList, let kind = Self.bareKind(value) {
                        throw Skip(reason: "the plist coder cannot store a bare \(kind): PropertyListEncoder (and so store.set) refuses one outside an array or a dictionary; import with --coder binary or json")
                    }
                    throw Skip(reason: "does not encode with the \(Self.coderName(coder)) coder: \(error)")
                }
                if bytes.count > maxValueSize {
                    throw Skip(reason: "value is \(bytes.count) bytes encoded, over the limit of \(maxValueSize) bytes")
                }
            } catch {
                skipped.append(.init(name: name, reason: error.reason))
                continue
            }
            batch.put(key, bytes)
            if let mixedKinds { mixed.append(.init(name: name, reason: mixedKinds.description)) }
        }
        if !batch.isEmpty {
            let store = try StoreAccess.openForWriting(directory, encryption: encryption, createIfMissing: true, output: output)
            do throws(CaskError) {
                try store.write(batch)
            } catch {
                try? store.close()
                throw .store(error)
            }
            try StoreAccess.close(store)
        }
        if json {
            try output.json(Report(directory: directory, file: file, coder: Self.coderName(coder), prefix: prefix,
                                   imported: batch.count, propertyListValues: mixed, skipped: skipped))
            return skipped.isEmpty ? .success : .dataError
        }
        if batch.isEmpty {
            let why = entries.isEmpty ? "its top-level dictionary is empty" : "every entry was skipped"
            output.line("Imported nothing from \(file) (\(why)); \(directory) was \(existed ? "not changed" : "not created").")
        } else {
            let keys = prefix.isEmpty ? "keys are the entry names" : "keys '\(KeyEscaping.escape(Array(prefix.utf8)))' + entry name"
            output.line("Imported \(batch.count) entr\(batch.count == 1 ? "y" : "ies") from \(file) into \(directory) (\(Self.coderName(coder)) coder, \(keys)).")
        }
        if !mixed.isEmpty {
            output.line("Stored \(mixed.count) entr\(mixed.count == 1 ? "y" : "ies") as PropertyListValue (values of mixed kinds, no Swift type of their own):")
            for entry in mixed { output.line("  \(Self.shortName(entry.name)): \(entry.reason)") }
        }
        if !skipped.isEmpty {
            output.line("Skipped \(skipped.count) entr\(skipped.count == 1 ? "y" : "ies"):")
            for entry in skipped { output.line("  \(Self.shortName(entry.name)): \(entry.reason)") }
        }
        return skipped.isEmpty ? .success : .dataError
    }

    fileprivate struct Skip: Error {
        var reason: String
    }

    /// An entry name for a line of text: escaped, and cut after 60 bytes.
    private static func shortName(_ name: String) -> String {
        let bytes = Array(name.utf8)
        guard bytes.count > 60 else { return "'\(KeyEscaping.escape(bytes))'" }
        return "'\(KeyEscaping.escape(Array(bytes.prefix(60))))…' (\(bytes.count) bytes)"
    }

    /// The kind of a value that is neither a container nor data, for a message; nil for those.
    private static func bareKind(_ value: PropertyListValue) -> String? {
        switch value {
        case .string: "string"
        case .integer: "integer"
        case .real: "real"
        case .bool: "boolean"
        case .date: "date"
        case .data, .array, .dictionary: nil
        }
    }

    static func coderName(_ coder: ObjectCoder) -> String {
        switch coder {
        case .binary: "binary"
        case .json: "json"
        case .propertyList: "plist"
        }
    }

    /// The most bytes read from <plist>.
    static let maxFileSize = 256 << 20

    /// The top-level entries of a property-list file, read by ``PropertyListReader``; a file that
    /// is not one is a data error.
    private static func readDictionary(_ file: String) throws(ToolError) -> [PropertyListReader.Entry] {
        let bytes = try readBytes(file)
        do throws(PropertyListReader.Error) {
            return try PropertyListReader.readDictionary(bytes)
        } catch {
            throw .data("\(file): \(error); nothing was imported")
        }
    }

    /// The bytes of `file`, following symbolic links: a regular file, or anything else that reads
    /// as a stream (a FIFO, a pipe, a character device) read to its end; at most ``maxFileSize``.
    private static func readBytes(_ file: String) throws(ToolError) -> [UInt8] {
        func failure(_ code: Int32) -> ToolError { .failure("cannot read \(file): \(String(cString: strerror(code)))") }
        var descriptor: Int32
        repeat { descriptor = open(file, O_RDONLY | O_CLOEXEC) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else { throw failure(errno) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw failure(errno) }
        let tooBig = ToolError.data("\(file) holds more than \(maxFileSize >> 20) MiB, the most import-defaults reads; nothing was imported")
        switch info.st_mode & S_IFMT {
        case S_IFDIR: throw .failure("cannot read \(file): it is a directory, not a property-list file")
        case S_IFREG: if info.st_size > maxFileSize { throw tooBig }
        default: break
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            if count == 0 { return bytes }
            guard count <= maxFileSize - bytes.count else { throw tooBig }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }
}

extension Error {
    /// The reason of a ``ImportDefaultsCommand`` skip, or the error's description.
    fileprivate var reason: String { (self as? ImportDefaultsCommand.Skip)?.reason ?? "\(self)" }
}
