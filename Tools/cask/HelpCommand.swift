/// `cask help [<subcommand>]`
struct HelpCommand: Subcommand {
    static let help = CommandHelp(
        name: "help",
        abstract: "Show help for a subcommand.",
        arguments: [.init(name: "subcommand", help: "The subcommand to explain; without it, the overview of all subcommands.", isOptional: true)])

    let topic: [UInt8]?

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        topic = arguments.optionalArgument("subcommand")
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        guard let topic else {
            output.write(CaskTool.rootHelp)
            return .success
        }
        let name = String(decoding: topic, as: UTF8.self)
        if name == Self.help.name {
            output.write(HelpFormatter.render(Self.help))
        } else if let command = CaskTool.subcommand(named: name) {
            output.write(HelpFormatter.render(command.help))
        } else {
            throw .usage("unknown subcommand '\(KeyEscaping.escape(topic))'")
        }
        return .success
    }
}
