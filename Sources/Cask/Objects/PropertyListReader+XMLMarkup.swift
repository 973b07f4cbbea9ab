// The XML property-list parser's markup: text and entities, tags, the prolog, comments; and where its errors are.
import Foundation

extension XMLPropertyListParser {
    /// The text content of `tag` and its end tag: characters, entities, CDATA sections and comments.
    mutating func text(of tag: Tag) throws(PropertyListReader.Error) -> String {
        guard !tag.empty else { return "" }
        var text: [UInt8] = []
        while true {
            guard position < bytes.count else { throw endOfFile(inside: tag) }
            let byte = bytes[position]
            if byte == UInt8(ascii: "&") {
                text.append(contentsOf: try entity())
            } else if byte != UInt8(ascii: "<") {
                text.append(byte)
                position += 1
            } else if looking(at: "</") {
                break
            } else if looking(at: "<![CDATA[") {
                let open = position
                position += 9
                guard let end = find("]]>") else { throw fail(at: open, "a CDATA section that never ends (no ']]>')") }
                text.append(contentsOf: bytes[position..<end])
                position = end + 3
            } else if looking(at: "<!--") {
                try comment()
            } else {
                let inner = try element(inside: tag)
                throw fail(at: inner.offset, "<\(inner.name)> inside <\(tag.name)>, which holds only text")
            }
        }
        try endTag(of: tag)
        return String(decoding: text, as: UTF8.self)  // The file was checked to be UTF-8; entities are scalars.
    }

    /// The character of the entity or character reference at `position`, as UTF-8.
    private mutating func entity() throws(PropertyListReader.Error) -> [UInt8] {
        let open = position
        var end = position + 1
        while end < bytes.count, end - open <= 12, bytes[end] != UInt8(ascii: ";") { end += 1 }
        guard end < bytes.count, bytes[end] == UInt8(ascii: ";") else {
            throw fail(at: open, "'&' that starts no entity (write &amp; for an ampersand)")
        }
        let name = String(decoding: bytes[(open + 1)..<end], as: UTF8.self)
        position = end + 1
        switch name {
        case "lt": return [UInt8(ascii: "<")]
        case "gt": return [UInt8(ascii: ">")]
        case "amp": return [UInt8(ascii: "&")]
        case "quot": return [UInt8(ascii: "\"")]
        case "apos": return [UInt8(ascii: "'")]
        default: break
        }
        var code: UInt32?
        if name.hasPrefix("#x") || name.hasPrefix("#X") {
            code = name.count > 2 && name.dropFirst(2).allSatisfy(\.isHexDigit) ? UInt32(name.dropFirst(2), radix: 16) : nil
        } else if name.hasPrefix("#") {
            code = name.count > 1 && name.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) ? UInt32(name.dropFirst()) : nil
        } else {
            throw fail(at: open, "unknown entity '&\(PropertyListReader.describe(name));' (property lists use &lt; &gt; &amp; &quot; &apos; and &#…;)")
        }
        guard let code, let scalar = Unicode.Scalar(code) else {
            throw fail(at: open, "'&\(PropertyListReader.describe(name));' is not a Unicode scalar")
        }
        return Array(String(Character(scalar)).utf8)
    }

    /// The start tag at `position` (after white space and comments were skipped).
    mutating func element(inside parent: Tag?) throws(PropertyListReader.Error) -> Tag {
        guard position < bytes.count else {
            if let parent { throw endOfFile(inside: parent) }
            throw fail(at: position, "the file ends before its <plist> element")
        }
        guard bytes[position] == UInt8(ascii: "<"), position + 1 < bytes.count, Self.isNameStart(bytes[position + 1]) else {
            if looking(at: "<![CDATA[") || bytes[position] != UInt8(ascii: "<") {
                throw fail(at: position, "\(describeHere()) where an element was expected\(parent.map { " in <\($0.name)>" } ?? "")")
            }
            throw fail(at: position, "'<' that starts no element")
        }
        let offset = position
        position += 1
        let nameStart = position
        while position < bytes.count, Self.isNameCharacter(bytes[position]) { position += 1 }
        let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
        var attributes = false
        while true {
            let spaced = skipSpace()
            guard position < bytes.count else { throw fail(at: offset, "the start tag <\(name) never ends") }
            if bytes[position] == UInt8(ascii: ">") {
                position += 1
                break
            }
            if looking(at: "/>") {
                position += 2
                return try checked(Tag(name: name, offset: offset, empty: true), attributes: attributes)
            }
            guard spaced, Self.isNameStart(bytes[position]) else {
                throw fail(at: position, "\(describeHere()) in the start tag <\(name)>")
            }
            while position < bytes.count, Self.isNameCharacter(bytes[position]) { position += 1 }
            skipSpace()
            guard looking(at: "=") else { throw fail(at: position, "an attribute of <\(name)> without '=' and a value") }
            position += 1
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") || bytes[position] == UInt8(ascii: "'") else {
                throw fail(at: position, "an attribute value of <\(name)> that is not quoted")
            }
            let quote = bytes[position]
            position += 1
            while position < bytes.count, bytes[position] != quote {
                guard bytes[position] != UInt8(ascii: "<") else { throw fail(at: position, "'<' in an attribute value of <\(name)>") }
                position += 1
            }
            guard position < bytes.count else { throw fail(at: offset, "the start tag <\(name) never ends") }
            position += 1
            attributes = true
        }
        return try checked(Tag(name: name, offset: offset, empty: false), attributes: attributes)
    }

    private func checked(_ tag: Tag, attributes: Bool) throws(PropertyListReader.Error) -> Tag {
        guard !attributes || tag.name == "plist" else {
            throw fail(at: tag.offset, "<\(tag.name)> has attributes; only <plist> takes any")
        }
        return tag
    }

    /// The end tag of `tag` at `position`.
    mutating func endTag(of tag: Tag) throws(PropertyListReader.Error) {
        guard position < bytes.count else { throw endOfFile(inside: tag) }
        let offset = position
        guard looking(at: "</") else { throw fail(at: offset, "\(describeHere()) where </\(tag.name)> was expected") }
        position += 2
        let nameStart = position
        while position < bytes.count, Self.isNameCharacter(bytes[position]) { position += 1 }
        let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
        skipSpace()
        guard looking(at: ">") else { throw fail(at: offset, "the end tag </\(name) never ends") }
        position += 1
        guard name == tag.name else {
            throw fail(at: offset, "</\(name)> closes <\(tag.name)> (\(place(tag.offset)))")
        }
    }

    /// Skips the XML declaration (refusing an encoding other than UTF-8), comments, processing
    /// instructions, one document type declaration and white space before the document's element.
    mutating func prolog() throws(PropertyListReader.Error) {
        if looking(at: "<?xml"), position + 5 < bytes.count, Self.isSpace(bytes[position + 5]) || bytes[position + 5] == UInt8(ascii: "?") {
            let open = position
            guard let end = find("?>") else { throw fail(at: open, "the XML declaration never ends (no '?>')") }
            let declaration = String(decoding: bytes[open..<end], as: UTF8.self)
            if let range = declaration.range(of: "encoding") {
                let rest = declaration[range.upperBound...].drop { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "'" || $0 == "\t" }
                let encoding = rest.prefix { $0 != "\"" && $0 != "'" && $0 != " " }
                guard ["utf-8", "utf8"].contains(encoding.lowercased()) else {
                    throw fail(at: open, "the XML declaration gives the encoding '\(PropertyListReader.describe(String(encoding)))'; only UTF-8 XML property lists are read")
                }
            }
            position = end + 2
        }
        var doctype = false
        while true {
            try skipMisc()
            guard looking(at: "<!DOCTYPE") else { return }
            guard !doctype else { throw fail(at: position, "a second <!DOCTYPE>") }
            doctype = true
            let open = position
            var brackets = 0
            var quote: UInt8?
            position += 9
            while true {
                guard position < bytes.count else { throw fail(at: open, "the <!DOCTYPE> never ends (no '>')") }
                let byte = bytes[position]
                position += 1
                if let open = quote {
                    if byte == open { quote = nil }
                } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    quote = byte
                } else if byte == UInt8(ascii: "[") {
                    brackets += 1
                } else if byte == UInt8(ascii: "]") {
                    brackets -= 1
                } else if byte == UInt8(ascii: ">"), brackets <= 0 {
                    break
                }
            }
        }
    }

    /// Skips white space, comments and processing instructions; throws at any other text.
    mutating func skipMisc() throws(PropertyListReader.Error) {
        while true {
            skipSpace()
            if looking(at: "<!--") {
                try comment()
            } else if looking(at: "<?") {
                let open = position
                guard let end = find("?>") else { throw fail(at: open, "a processing instruction that never ends (no '?>')") }
                position = end + 2
            } else {
                return
            }
        }
    }

    private mutating func comment() throws(PropertyListReader.Error) {
        let open = position
        position += 4
        guard let end = find("-->") else { throw fail(at: open, "a comment that never ends (no '-->')") }
        position = end + 3
    }

    @discardableResult
    private mutating func skipSpace() -> Bool {
        let first = position
        while position < bytes.count, Self.isSpace(bytes[position]) { position += 1 }
        return position > first
    }

    func looking(at text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard count <= bytes.count - position else { return false }
        return text.withUTF8Buffer { prefix in (0..<count).allSatisfy { bytes[position + $0] == prefix[$0] } }
    }

    /// Where `text` next occurs from `position`.
    private func find(_ text: StaticString) -> Int? {
        let pattern = text.withUTF8Buffer { Array($0) }
        guard bytes.count - position >= pattern.count else { return nil }
        var index = position
        while index <= bytes.count - pattern.count {
            if bytes[index] == pattern[0], (1..<pattern.count).allSatisfy({ bytes[index + $0] == pattern[$0] }) { return index }
            index += 1
        }
        return nil
    }

    private static func isNameStart(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || byte == UInt8(ascii: "_")
    }

    private static func isNameCharacter(_ byte: UInt8) -> Bool {
        isNameStart(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
    }

    // MARK: Errors

    /// Throws at the first byte that is not UTF-8.
    func checkUTF8() throws(PropertyListReader.Error) {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes[start...].makeIterator()
        var offset = start
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let scalar): offset += scalar.count
            case .emptyInput: return
            case .error(let length):
                throw fail(at: offset, "byte \(PropertyListReader.hex([bytes[offset]])) is not valid UTF-8 (\(length) byte\(length == 1 ? "" : "s"))")
            }
        }
    }

    /// What is at `position`, for a message: "text 'abc'", "'<'", "the end of the file".
    func describeHere() -> String {
        guard position < bytes.count else { return "the end of the file" }
        if bytes[position] == UInt8(ascii: "<") {
            let end = bytes[position...].prefix(40).firstIndex(of: UInt8(ascii: ">")).map { $0 + 1 } ?? min(position + 20, bytes.count)
            return "'\(PropertyListReader.describe(String(decoding: bytes[position..<end], as: UTF8.self)))'"
        }
        let line = bytes[position...].prefix(30).prefix { $0 != UInt8(ascii: "<") && $0 != 0x0A }
        return "text '\(PropertyListReader.describe(String(decoding: line, as: UTF8.self)))'"
    }

    private func endOfFile(inside tag: Tag) -> PropertyListReader.Error {
        fail(at: bytes.count, "the file ends inside <\(tag.name)> (\(place(tag.offset)))")
    }

    func fail(at offset: Int, _ reason: String) -> PropertyListReader.Error {
        let (line, column) = lineAndColumn(offset)
        return Error(.xml(line: line, column: column), reason)
    }

    /// "opened at line 3, column 5", for a message naming a second place.
    private func place(_ offset: Int) -> String {
        let (line, column) = lineAndColumn(offset)
        return "opened at line \(line), column \(column)"
    }

    /// The 1-based line and column (in Unicode scalars) of `offset`.
    private func lineAndColumn(_ offset: Int) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        for byte in bytes[start..<min(offset, bytes.count)] {
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }
}
