import Cask
import Foundation

/// `cask import-defaults <dir> <plist> [--prefix <p>] [--coder <c>] [--json]`
struct ImportDefaultsCommand: Subcommand {
    static let help = CommandHelp(
        name: "import-defaults",
        abstract: "Import the entries of a property-list file.",
        discussion: [
            "Reads a property list, XML or binary, whose top level is a dictionary, and stores each top-level entry under the key <prefix><name>, its value a PropertyListValue encoded with the object coder: read it back in Swift with store.get(PropertyListValue.self, forKey: key) (with coder: .json or .propertyList if you chose one). Strings, integers, reals, booleans, dates, data, arrays and dictionaries round-trip exactly, a boolean never turning into a number.",
            "Every entry is written in one atomic batch: after a crash, all of them are in the store or none. An entry that cannot be stored is skipped and reported with the reason (a key over 65535 bytes, a value over the store's limit, an integer larger than Int.max, a real that JSON cannot hold); the command then exits 65, having imported the others. A file that is not a property list with a dictionary at the top exits 65 and imports nothing.",
            "Creates the store if <dir> does not exist and takes its lock, so it fails (exit 1) while another process has the store open for writing. Everything is on disk (fdatasync) when the command exits.",
        ],
        arguments: [
            StoreAccess.directoryArgument,
            .init(name: "plist", help: "The property-list file to import."),
        ],
        options: [
            .init(name: "prefix", valueName: "p", help: "Put <p> before each entry's name to make its key (default: none)."),
            .init(name: "coder", valueName: "c", help: "The object coder <c> for the values: binary (the default, as the store's), json or plist."),
            StoreAccess.jsonFlag,
        ])

    let directory: String
    let file: String
    let prefix: String
    let coder: ObjectCoder
    let json: Bool

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
    }

    private struct Skipped: Encodable {
        var name: String
        var reason: String
    }

    private struct Report: Encodable {
        var directory: String
        var file: String
        var coder: String
        var prefix: String
        var imported: Int
        var skipped: [Skipped]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let entries = try Self.readDictionary(file)
        let maxValueSize = CaskStore.Options().maxValueSize
        var batch = WriteBatch()
        var skipped: [Skipped] = []
        for (name, object) in entries.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            let key = Array((prefix + name).utf8)
            let value: PropertyListValue
            let bytes: [UInt8]
            do {
                if key.isEmpty { throw Skip(reason: CaskError.emptyKey.description) }
                if key.count > Limits.maxKeyLength {
                    throw Skip(reason: "key is \(key.count) bytes, over the limit of \(Limits.maxKeyLength) bytes")
                }
                do { value = try PropertyListValue(propertyList: object) } catch {
                    throw Skip(reason: "\(error)")
                }
                do { bytes = try coder.encode(value) } catch {
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
        }
        if !batch.isEmpty {
            let store = try StoreAccess.openForWriting(directory, createIfMissing: true)
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
                                   imported: batch.count, skipped: skipped))
            return skipped.isEmpty ? .success : .dataError
        }
        let keys = prefix.isEmpty ? "keys are the entry names" : "keys '\(KeyEscaping.escape(Array(prefix.utf8)))' + entry name"
        output.line("Imported \(batch.count) entr\(batch.count == 1 ? "y" : "ies") from \(file) into \(directory) (\(Self.coderName(coder)) coder, \(keys)).")
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

    static func coderName(_ coder: ObjectCoder) -> String {
        switch coder {
        case .binary: "binary"
        case .json: "json"
        case .propertyList: "plist"
        }
    }

    /// The top-level dictionary of a property-list file; a file that is not one is a data error.
    private static func readDictionary(_ file: String) throws(ToolError) -> [String: Any] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
            throw .failure("cannot read \(file): \((error as NSError).localizedDescription)")
        }
        let object: Any
        do { object = try PropertyListSerialization.propertyList(from: data, options: [], format: nil) } catch {
            throw .data("\(file) is not a property list (XML or binary); nothing was imported")
        }
        guard let dictionary = object as? [AnyHashable: Any] else {
            throw .data("\(file) holds a property list whose top level is \(type(of: object)), not a dictionary; nothing was imported")
        }
        var entries: [String: Any] = [:]
        for (key, value) in dictionary {
            guard let name = key.base as? String else {
                throw .data("\(file) has a top-level key that is not a string; nothing was imported")
            }
            entries[name] = value
        }
        return entries
    }
}

extension Error {
    /// The reason of a ``ImportDefaultsCommand`` skip, or the error's description.
    fileprivate var reason: String { (self as? ImportDefaultsCommand.Skip)?.reason ?? "\(self)" }
}
