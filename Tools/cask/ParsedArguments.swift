/// A command line parsed against a ``CommandHelp``.
///
/// Grammar: positional arguments in the order the command declares them; `--name value`,
/// `--name=value` for options; `--name` for flags; options anywhere; `-h`/`--help` anywhere asks
/// for help; `--` ends the options, so a key starting with `-` goes after it. Arguments are bytes
/// (argv is not necessarily UTF-8), so a key can be passed exactly as the shell hands it over.
struct ParsedArguments {
    enum Outcome {
        case help
        case parsed(ParsedArguments)
    }

    private var positionals: [String: [UInt8]] = [:]
    private var flags: Set<String> = []
    private var values: [String: [UInt8]] = [:]

    /// The value of a declared positional argument (always present after a successful parse).
    func argument(_ name: String) -> [UInt8] { positionals[name] ?? [] }
    /// The value of a declared optional positional argument, if given.
    func optionalArgument(_ name: String) -> [UInt8]? { positionals[name] }
    func flag(_ name: String) -> Bool { flags.contains(name) }
    func option(_ name: String) -> [UInt8]? { values[name] }

    static func parse(_ arguments: [[UInt8]], for help: CommandHelp) throws(ToolError) -> Outcome {
        var parsed = ParsedArguments()
        var given: [[UInt8]] = []
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            let text = String(decoding: argument, as: UTF8.self)
            if optionsEnded || argument.first != UInt8(ascii: "-") || argument.count == 1 {
                given.append(argument)
                continue
            }
            if text == "--" { optionsEnded = true; continue }
            if text == "-h" || text == "--help" { return .help }
            guard text.hasPrefix("--") else { throw .usage("unknown option '\(KeyEscaping.escape(argument))'") }
            var name = String(text.dropFirst(2))
            var inlineValue: [UInt8]?
            if let equals = argument.firstIndex(of: UInt8(ascii: "=")) {
                name = String(decoding: argument[2..<equals], as: UTF8.self)
                inlineValue = Array(argument[(equals + 1)...])
            }
            guard let option = help.options.first(where: { $0.name == name }) else {
                throw .usage("unknown option '--\(KeyEscaping.escape(Array(name.utf8)))'")
            }
            if option.valueName == nil {
                guard inlineValue == nil else { throw .usage("flag '--\(name)' takes no value") }
                parsed.flags.insert(name)
                continue
            }
            guard parsed.values[name] == nil else { throw .usage("option '--\(name)' is given more than once") }
            if let inlineValue {
                parsed.values[name] = inlineValue
            } else {
                guard index < arguments.count else { throw .usage("missing value for option '\(option.label)'") }
                parsed.values[name] = arguments[index]
                index += 1
            }
        }
        let required = help.arguments.filter { !$0.isOptional }.count
        if given.count < required {
            throw .usage("missing argument <\(help.arguments[given.count].name)>")
        }
        if given.count > help.arguments.count {
            throw .usage("unexpected argument '\(KeyEscaping.escape(given[help.arguments.count]))'")
        }
        for (spec, value) in zip(help.arguments, given) { parsed.positionals[spec.name] = value }
        return .parsed(parsed)
    }
}

extension ParsedArguments {
    /// What to do with a path that is not UTF-8.
    static let utf8PathsOnly = "cask takes UTF-8 paths only: rename it, or reach it through a symbolic link whose path is UTF-8"

    /// A path argument (paths are handed to the store as strings).
    func path(_ name: String) throws(ToolError) -> String {
        let bytes = argument(name)
        guard var path = String(validating: bytes, as: UTF8.self) else {
            throw .usage("<\(name)> is not valid UTF-8: '\(KeyEscaping.escape(bytes))' (\(Self.utf8PathsOnly))")
        }
        guard !path.isEmpty else { throw .usage("<\(name)> is empty") }
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }  // `dir/` names files `dir/0000000001.cask`
        return path
    }

    /// A key argument or option value: its bytes, unescaped when `--escaped` is given.
    func key(_ bytes: [UInt8], label: String) throws(ToolError) -> [UInt8] {
        guard flag("escaped") else { return bytes }
        do { return try KeyEscaping.unescape(bytes) } catch {
            throw .usage("\(label) has an invalid escape at byte \(error.offset): use \\xHH for a byte and \\\\ for a backslash")
        }
    }
}
