/// The `cask` command: finds the subcommand, parses its arguments, runs it, and turns every
/// outcome into output and an ``ExitCode``.
enum CaskTool {
    static var subcommands: [any Subcommand.Type] {
        [
            PutCommand.self, GetCommand.self, DeleteCommand.self, ListCommand.self,
            StatCommand.self, VerifyCommand.self, DumpCommand.self,
            CompactCommand.self, RecoverCommand.self, BackupCommand.self,
            ExportCommand.self, ImportCommand.self, ImportDefaultsCommand.self,
            KeygenCommand.self, RekeyCommand.self,
        ]
    }

    static let abstract = "Operate and inspect a Cask store from the shell."
    static let discussion = [
        "A store is a directory of segment files. Commands that write (put, delete, compact, recover, import, import-defaults, rekey) take the store's lock and fail while another process has the store open for writing; commands that read (get, list, stat, verify, dump, export, backup) take no lock and work alongside a writer.",
        "An encrypted store is opened with its key: every command that opens a store takes --key-file <file> ('cask keygen' writes a key file).",
    ]
    static let usage = "cask <subcommand>"

    static var rootHelp: String {
        var text = HelpFormatter.overview(abstract, discussion)
        text += "USAGE: \(usage)\n\n"
        text += "OPTIONS:\n" + HelpFormatter.entry("-h, --help", CommandHelp.helpOption.help) + "\n"
        text += "SUBCOMMANDS:\n"
        for command in subcommands { text += HelpFormatter.entry(command.help.name, command.help.abstract) }
        text += HelpFormatter.entry(HelpCommand.help.name, HelpCommand.help.abstract)
        text += "\n  See 'cask help <subcommand>' for detailed help.\n\n"
        text += "EXIT STATUS:\n"
        text += HelpFormatter.entry("0", "Success.")
        text += HelpFormatter.entry("1", "Failure: a missing key, a store locked by another writer, an I/O error, or an encryption key the command cannot use (a key file missing, a link or holding no key; no --key-file for an encrypted store, or one for a store that is not; the wrong key).")
        text += HelpFormatter.entry("64", "Usage error: the command line is wrong.")
        text += HelpFormatter.entry("65", "Data error: the store holds damaged data ('verify' found damage, a read hit a damaged record, 'recover --dry-run' found something to repair), or the input is malformed ('import', 'import-defaults').")
        return text
    }

    static func run(_ arguments: [[UInt8]], output: Output) -> ExitCode {
        guard let first = arguments.first else {
            output.write(rootHelp)
            return .success
        }
        let name = String(decoding: first, as: UTF8.self)
        if name == "-h" || name == "--help" {
            output.write(rootHelp)
            return .success
        }
        if name == HelpCommand.help.name {
            return execute(HelpCommand.self, Array(arguments.dropFirst()), output: output)
        }
        guard let command = subcommand(named: name) else {
            let what = first.first == UInt8(ascii: "-") ? "unknown option" : "unknown subcommand"
            output.error("Error: \(what) '\(KeyEscaping.escape(first))'\nUsage: \(usage)\n  See 'cask help' for more information.\n")
            return .usage
        }
        return execute(command, Array(arguments.dropFirst()), output: output)
    }

    static func subcommand(named name: String) -> (any Subcommand.Type)? {
        subcommands.first { $0.help.name == name }
    }

    private static func execute(_ command: any Subcommand.Type, _ arguments: [[UInt8]], output: Output) -> ExitCode {
        do throws(ToolError) {
            switch try ParsedArguments.parse(arguments, for: command.help) {
            case .help:
                output.write(HelpFormatter.render(command.help))
                return .success
            case .parsed(let parsed):
                return try command.init(parsing: parsed).run(output)
            }
        } catch {
            var text = "Error: \(error.message)\n"
            if case .usage = error {
                text += "Usage: \(command.help.usage)\n  See 'cask \(command.help.name) --help' for more information.\n"
            }
            output.error(text)
            return error.exitCode
        }
    }
}
