import Cask
import Foundation

/// `cask list <dir> [--prefix <prefix>] [--escaped] [--json] [--key-file <file>]`
struct ListCommand: Subcommand {
    static let help = CommandHelp(
        name: "list",
        abstract: "List keys, one per line, sorted bytewise.",
        discussion: [
            "Each key is printed as its UTF-8 text, except that a byte that is not printable UTF-8 (invalid UTF-8, control characters such as newline or tab, invisible format characters) is printed as \\xHH, and a backslash as \\\\. So every line is exactly one key, and a printed key can be passed back to get, put and delete with --escaped. With --json, keys that are valid UTF-8 are strings under \"key\" and other keys are base64 under \"keyBase64\".",
            "Opens the store read-only and takes no lock, so it works while another process writes. When opening skipped damaged records, the keys that could be read are listed, a warning goes to standard error, and the exit status is 65 ('cask verify' lists the damage).",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [
            .init(name: "prefix", valueName: "prefix", help: "Only keys that start with these bytes."),
            KeyEscaping.escapedFlag,
            StoreAccess.jsonFlag,
            KeyFile.option,
        ])

    let directory: String
    let prefix: [UInt8]
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        prefix = try arguments.option("prefix").map { (value) throws(ToolError) in try arguments.key(value, label: "--prefix") } ?? []
        json = arguments.flag("json")
        encryption = try KeyFile.encryption(arguments)
    }

    private struct JSONReport: Encodable {
        struct Key: Encodable {
            var key: String?
            var keyBase64: String?
        }

        var count: Int
        var keys: [Key]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let store = try StoreAccess.openForReading(directory, encryption: encryption)
        let damaged = StoreAccess.warnOfSkippedDamage(store, in: directory, output: output)
        do throws(ToolError) { try list(store, output) } catch {
            try? store.close()
            throw error
        }
        try StoreAccess.close(store)
        return damaged ? .dataError : .success
    }

    private func list(_ store: CaskStore, _ output: Output) throws(ToolError) {
        if json {
            let keys = try CaskError.wrap { () throws(CaskError) in try store.keys(prefix: prefix) }
            try output.json(JSONReport(count: keys.count, keys: keys.map { key in
                if let text = String(validating: key, as: UTF8.self) { return .init(key: text) }
                return .init(keyBase64: Data(key).base64EncodedString())
            }))
        } else {
            // Straight from the ordered index into the output buffer: no array, no string per key.
            try CaskError.wrap { () throws(CaskError) in
                try store.forEachKey(in: .prefix(prefix)) { key in
                    output.append { line in
                        KeyEscaping.append(key, to: &line)
                        line.append(UInt8(ascii: "\n"))
                    }
                }
            }
        }
    }
}
