/// Renders help in the layout of swift-argument-parser:
/// `OVERVIEW:` / `USAGE:` / `ARGUMENTS:` / `OPTIONS:` / `SUBCOMMANDS:`, labels in a 26-column
/// gutter, text wrapped at 80 columns (fixed, so the output does not depend on the terminal).
enum HelpFormatter {
    static let width = 80
    static let gutter = 26

    static func render(_ help: CommandHelp) -> String {
        var text = overview(help.abstract, help.discussion)
        text += usage(help) + "\n"
        if !help.arguments.isEmpty {
            text += "ARGUMENTS:\n"
            for argument in help.arguments { text += entry("<\(argument.name)>", argument.help) }
            text += "\n"
        }
        text += "OPTIONS:\n"
        for option in help.options { text += entry(option.label, option.help) }
        text += entry("-h, --help", CommandHelp.helpOption.help)
        return text
    }

    /// `USAGE: cask <name> <arguments…> [options…]`, wrapped at ``width`` columns between arguments
    /// and options, each further line indented under the first argument; ends with a newline.
    static func usage(_ help: CommandHelp) -> String {
        let head = "USAGE: cask \(help.name)"
        let pad = String(repeating: " ", count: head.count + 1)
        var lines: [String] = [head]
        for item in help.arguments.map(\.label) + help.options.map({ "[\($0.label)]" }) {
            if lines[lines.count - 1].count + 1 + item.count > width && lines[lines.count - 1] != pad {
                lines.append(pad + item)
            } else {
                lines[lines.count - 1] += " " + item
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func overview(_ abstract: String, _ discussion: [String]) -> String {
        var text = wrap("OVERVIEW: " + abstract, indent: 0) + "\n"
        for paragraph in discussion { text += wrap(paragraph, indent: 0) + "\n" }
        return text
    }

    /// `  label                   help…`, the help wrapped and aligned at the gutter; a label too
    /// long for the gutter gets its help on the next line.
    static func entry(_ label: String, _ help: String) -> String {
        let head = "  " + label
        let body = wrap(help, indent: gutter)
        let bodyText = String(body.dropFirst(gutter))
        if head.count <= gutter - 2 {
            return head + String(repeating: " ", count: gutter - head.count) + bodyText
        }
        return head + "\n" + body
    }

    /// Wraps `text` at ``width`` columns, every line indented by `indent` spaces; ends with a newline.
    static func wrap(_ text: String, indent: Int) -> String {
        let pad = String(repeating: " ", count: indent)
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if !current.isEmpty && indent + current.count + 1 + word.count > width {
                lines.append(pad + current)
                current = ""
            }
            current += (current.isEmpty ? "" : " ") + word
        }
        lines.append(pad + current)
        return lines.joined(separator: "\n") + "\n"
    }
}
