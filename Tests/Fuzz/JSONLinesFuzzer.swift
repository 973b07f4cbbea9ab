import Foundation

// libFuzzer target: arbitrary bytes as one line of `cask import` input, through the tool's strict
// reader (Tools/cask/ExportLineParser.swift and ExportLineParser+Cursor.swift, compiled into this
// binary with ExportLineWriter and Base64). The first byte's low bit says whether the line starts
// the input (a byte-order mark may start it); the rest is the line. Nothing may crash or hang; a
// line the reader accepts must come back, through the writer, as a line that reads to the same
// entry; and every base64 text it accepts must be exactly the writer's encoding of its bytes (the
// canonical form).
// Built and run by Tools/fuzz.sh.

enum JSONLinesFuzzer {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        guard let flags = bytes.first else { return }
        let line = Array(bytes.dropFirst())[...]
        guard let entry = try? ExportLineParser.parse(line, isFirstLine: flags & 1 == 1) else { return }
        var written: [UInt8] = []
        ExportLineWriter.append(key: entry.key[...], value: entry.value[...], expiresAtMilliseconds: entry.expiresAtMilliseconds, to: &written)
        guard written.last == UInt8(ascii: "\n"), !written.dropLast().contains(UInt8(ascii: "\n")) else {
            fatalError("the writer's line is not one line")
        }
        let reread: ExportEntry
        do { reread = try ExportLineParser.parse(written.dropLast(), isFirstLine: false) } catch {
            fatalError("the reader refuses the writer's line: \(error.reason)")
        }
        guard reread == entry else { fatalError("the writer's line reads to another entry") }
        // Base64: the text of any accepted entry's bytes decodes back to them.
        for field in [entry.key, entry.value] {
            var text: [UInt8] = []
            Base64.encode(field[...], into: &text)
            guard (try? Base64.decode(text[...])) == field else { fatalError("base64 does not round-trip") }
        }
        // And a text that decodes is the encoding of what it decodes to.
        if let decoded = try? Base64.decode(line) {
            var text: [UInt8] = []
            Base64.encode(decoded[...], into: &text)
            guard text[...] == line else { fatalError("a non-canonical base64 text was accepted") }
        }
    }

    /// Lines of the shapes `cask export` writes, and near misses of the reader's rules.
    static func writeSeeds(to seeds: String) throws {
        var lines: [(String, [UInt8])] = [
            ("text", Array(#"{"key":"user/42","value":"Ada"}"#.utf8)),
            ("binary", Array(#"{"expiresAtMilliseconds":1767225600000,"keyBase64":"/wA=","valueBase64":"AAEC"}"#.utf8)),
            ("escapes", Array(#"{"key":"a\"b\\c\/\b\f\n\r\t\u0000\u00e9\ud83d\ude00","value":""}"#.utf8)),
            ("nested", Array(#"{"key":"k","value":"v","x":[1,{"a":[true,false,null,-1.5e+3]}]}"#.utf8)),
            ("duplicate", Array(#"{"key":"k","key":"k","value":"v"}"#.utf8)),
            ("trailing-comma", Array(#"{"key":"k","value":"v",}"#.utf8)),
            ("utf8", Array("{\"key\":\"ключ\",\"value\":\"値 😀\"}".utf8)),
            ("base64-only", Array("QUJD".utf8)),
        ]
        lines.append(("bom", [0xEF, 0xBB, 0xBF] + Array(#"{"key":"k","value":"v"}"#.utf8)))
        for (name, line) in lines {
            try Data([1] + line).write(to: URL(fileURLWithPath: seeds + "/" + name))
        }
    }
}
