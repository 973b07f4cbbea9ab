/// What a subcommand accepts and says about itself. The parser and the help text both read it,
/// so the two cannot drift apart.
struct CommandHelp {
    struct Argument {
        /// Shown as `<name>` (or `[<name>]` when optional; only trailing arguments may be optional).
        var name: String
        var help: String
        var isOptional = false

        var label: String { isOptional ? "[<\(name)>]" : "<\(name)>" }
    }

    struct Option {
        /// The long name without dashes: `prefix` for `--prefix`.
        var name: String
        /// Nil for a flag; otherwise the option takes a value, shown as `<valueName>`.
        var valueName: String?
        var help: String

        var label: String { "--\(name)" + (valueName.map { " <\($0)>" } ?? "") }
    }

    var name: String
    /// One line, shown in the subcommand list and after `OVERVIEW:`.
    var abstract: String
    /// Paragraphs shown under the abstract, separated by blank lines.
    var discussion: [String] = []
    var arguments: [Argument] = []
    var options: [Option] = []

    static let helpOption = Option(name: "help", valueName: nil, help: "Show help information.")

    /// `cask get <dir> <key> [--escaped]`
    var usage: String {
        (["cask", name] + arguments.map(\.label) + options.map { "[\($0.label)]" }).joined(separator: " ")
    }
}

/// A subcommand: parse and validate in `init`, then `run`.
protocol Subcommand {
    static var help: CommandHelp { get }
    init(parsing arguments: ParsedArguments) throws(ToolError)
    func run(_ output: Output) throws(ToolError) -> ExitCode
}
