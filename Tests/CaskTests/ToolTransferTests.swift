import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// What the fast paths of `cask list`, `export` and `import` must keep (issue 24): the order of
/// keys, the escapes, the JSON the writer makes where it skips eight bytes at a time, lines and
/// UTF-8 sequences split across the reader's 64 KiB reads, and the reader's strictness where it
/// skips ahead. Run as the built binary.
final class ToolTransferTests: XCTestCase {
    func cask(_ arguments: [String], stdin: Data = Data(), file: StaticString = #filePath, line: UInt = #line) throws -> ToolTests.Run {
        try ToolTests.cask(arguments, stdin: stdin, file: file, line: line)
    }

    private func makeStore(_ entries: [([UInt8], [UInt8])]) throws -> TemporaryDirectory {
        let dir = TemporaryDirectory("cask-transfer")
        let store = try CaskStore.open(at: dir.path)
        for (key, value) in entries { try store.put(key, value) }
        try store.close()
        return dir
    }

    /// Keys written in a shuffled order come out of `list` and `export` in bytewise order, each
    /// escaped as `list` documents: printable ASCII as it is, `\` doubled, control bytes and DEL,
    /// invisible format characters and every byte of invalid UTF-8 as `\xHH`.
    func testListAndExportWalkKeysInByteOrderWithTheirEscapes() throws {
        let escaped: [([UInt8], String)] = [
            (Array("plain".utf8), "plain"),
            (Array("back\\slash".utf8), "back\\\\slash"),
            (Array("tab\tkey".utf8), "tab\\x09key"),
            ([0x7F] + Array("del".utf8), "\\x7fdel"),
            ([0xFF, 0x00], "\\xff\\x00"),
            (Array("caf\u{e9} \u{1F98A}".utf8), "caf\u{e9} \u{1F98A}"),  // printable beyond ASCII: as it is
            (Array("zero\u{200B}width".utf8), "zero\\xe2\\x80\\x8bwidth"),  // a format character
            (Array("next\u{85}line".utf8), "next\\xc2\\x85line"),  // a C1 control
            ([0xE1, 0x80, 0x41], "\\xe1\\x80A"),  // a sequence cut short by an ASCII byte
            ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),  // a UTF-8 surrogate
            ([0xC0, 0xAF], "\\xc0\\xaf"),  // an overlong form
            (Array("ends in".utf8) + [0xF0, 0x9F], "ends in\\xf0\\x9f"),  // cut short by the end
            (Array("a long key of plain ASCII, over eight bytes".utf8), "a long key of plain ASCII, over eight bytes"),
        ]
        var rng = SeededGenerator(seed: 24)
        var entries = escaped.map { ($0.0, Array("v".utf8)) }
        for i in 0..<300 { entries.append((Array("user/\(i * 7919 % 1000)".utf8), Array("value \(i)".utf8))) }
        entries.shuffle(using: &rng)
        let dir = try makeStore(entries)

        let sorted = entries.map(\.0).sorted { $0.lexicographicallyPrecedes($1) }
        let shown = Dictionary(uniqueKeysWithValues: escaped.map { ($0.0, $0.1) })
        let expected = sorted.map { shown[$0] ?? String(decoding: $0, as: UTF8.self) }
        var run = try cask(["list", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(run.out, expected.map { $0 + "\n" }.joined())

        run = try cask(["list", dir.path, "--prefix", "user/9"])
        XCTAssertEqual(run.out, expected.filter { $0.hasPrefix("user/9") }.map { $0 + "\n" }.joined())

        run = try cask(["export", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        struct Line: Decodable { var key: String?, keyBase64: String? }
        let exported = try run.stdout.split(separator: UInt8(ascii: "\n")).map { line -> [UInt8] in
            let decoded = try JSONDecoder().decode(Line.self, from: Data(line))
            if let key = decoded.key { return Array(key.utf8) }
            return [UInt8](try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(decoded.keyBase64))))
        }
        XCTAssertEqual(exported, sorted)
    }

    /// Values with a byte to escape, a character beyond ASCII or a byte that is not UTF-8 at every
    /// offset of the first 24 (so before, inside and after each 8-byte word the writer checks at
    /// once) are written as JSON that Foundation reads back to the same bytes, or as base64; and
    /// import reads them back exactly.
    func testExportEscapesAtEveryOffsetAndRoundTrips() throws {
        let specials: [(name: String, bytes: [UInt8])] = [
            ("quote", [0x22]), ("backslash", [0x5C]), ("newline", [0x0A]), ("nul", [0x00]), ("unit-separator", [0x1F]),
            ("del", [0x7F]), ("e-acute", [0xC3, 0xA9]), ("fox", [0xF0, 0x9F, 0xA6, 0x8A]), ("invalid", [0xFF]), ("surrogate", [0xED, 0xB0, 0x80]),
        ]
        var entries: [([UInt8], [UInt8])] = []
        for special in specials {
            for offset in 0..<24 {
                let value = [UInt8](repeating: UInt8(ascii: "a"), count: offset) + special.bytes + [UInt8](repeating: UInt8(ascii: "z"), count: 17)
                entries.append((Array("\(special.name)/\(offset)".utf8), value))
                entries.append((Array("key-\(special.name)-".utf8) + [UInt8](repeating: UInt8(ascii: "k"), count: offset) + special.bytes, Array("v".utf8)))
            }
        }
        let dir = try makeStore(entries)
        let run = try cask(["export", dir.path])
        XCTAssertEqual(run.status, 0, run.err)
        struct Line: Decodable { var key: String?, keyBase64: String?, value: String?, valueBase64: String? }
        var found: [[UInt8]: [UInt8]] = [:]
        for line in run.stdout.split(separator: UInt8(ascii: "\n")) {
            let decoded = try JSONDecoder().decode(Line.self, from: Data(line))
            func bytes(_ text: String?, _ base64: String?) throws -> [UInt8] {
                if let text { return Array(text.utf8) }
                return [UInt8](try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(base64))))
            }
            found[try bytes(decoded.key, decoded.keyBase64)] = try bytes(decoded.value, decoded.valueBase64)
        }
        XCTAssertEqual(found, Dictionary(uniqueKeysWithValues: entries))
        let text = run.out
        XCTAssertTrue(text.contains(#"{"key":"quote/9","value":"aaaaaaaaa\"zzzzzzzzzzzzzzzzz"}"#), "escaped as JSONEncoder escapes")
        XCTAssertTrue(text.contains(#"{"key":"nul/0","value":"\u0000zzzzzzzzzzzzzzzzz"}"#))
        XCTAssertTrue(text.contains(#"{"key":"invalid/3","valueBase64":"YWFh/3p6enp6enp6enp6enp6enp6"}"#), "not UTF-8: base64")

        let copy = TemporaryDirectory("cask-transfer-copy")
        let imported = try cask(["import", copy.appending("store")], stdin: run.stdout)
        XCTAssertEqual(imported.status, 0, imported.err)
        XCTAssertEqual(try cask(["export", copy.appending("store")]).stdout, run.stdout, "export → import → export changes nothing")
    }

    /// The reader takes 64 KiB at a time: a line, a UTF-8 sequence, an escape and a CRLF split
    /// across two reads, and a line longer than one read, are read as if whole — from a file and
    /// from a pipe.
    func testImportReadsLinesSplitAcrossReads() throws {
        let block = 64 << 10
        var input: [UInt8] = []
        var expected: [[UInt8]: [UInt8]] = [:]
        var pads = 0
        /// Appends a line of padding so that the input is `offset` bytes long.
        func pad(to offset: Int) {
            let head = Array(#"{"key":"pad\#(pads)","value":""#.utf8), tail = Array("\"}\n".utf8)
            let length = offset - input.count - head.count - tail.count
            precondition(length >= 0)
            input += head + [UInt8](repeating: UInt8(ascii: "."), count: length) + tail
            expected[Array("pad\(pads)".utf8)] = [UInt8](repeating: UInt8(ascii: "."), count: length)
            pads += 1
        }
        /// Appends a line whose byte `at` of its value's text (as written) falls on the offset `boundary`.
        func line(_ key: String, text: String, value: [UInt8], splitting at: Int, across boundary: Int, end: String = "\n") {
            let head = Array(#"{"key":"\#(key)","value":""#.utf8)
            pad(to: boundary - head.count - at)
            input += head + Array(text.utf8) + Array("\"}".utf8) + Array(end.utf8)
            expected[Array(key.utf8)] = value
        }
        line("e-acute", text: "caf\u{e9}!", value: Array("caf\u{e9}!".utf8), splitting: 4, across: block)  // C3 | A9
        line("fox", text: "\u{1F98A}", value: Array("\u{1F98A}".utf8), splitting: 1, across: 2 * block)  // F0 | 9F A6 8A
        line("escape", text: #"a\u00e9b"#, value: Array("a\u{e9}b".utf8), splitting: 3, across: 3 * block)  // a\u0 | 0e9b
        line("crlf", text: "v", value: Array("v".utf8), splitting: 3, across: 4 * block, end: "\r\n")  // "v"}\r | \n
        var long: [UInt8] = [], longText = ""
        for i in 0..<20_000 {
            let piece = i % 5 == 0 ? "q\"\u{e9}\\ " : "word \(i) "
            long += Array(piece.utf8)
            longText += piece.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
        XCTAssertGreaterThan(longText.utf8.count, 2 * block, "a line longer than two reads")
        line("long", text: longText, value: long, splitting: 10, across: 5 * block)
        input += Array(#"{"key":"last","value":"no newline at the end"}"#.utf8)
        expected[Array("last".utf8)] = Array("no newline at the end".utf8)

        let dir = TemporaryDirectory("cask-transfer-split")
        let file = dir.appending("input.jsonl")
        try Data(input).write(to: URL(fileURLWithPath: file))
        for (name, arguments, stdin) in [("file", ["--input", file], Data()), ("pipe", [], Data(input))] {
            let target = dir.appending(name)
            let run = try cask(["import", target] + arguments, stdin: stdin)
            XCTAssertEqual(run.status, 0, run.err)
            XCTAssertTrue(run.out.hasPrefix("imported \(expected.count) entries"), run.out)
            let store = try CaskStore.open(at: target, options: .readOnly)
            var found: [[UInt8]: [UInt8]] = [:]
            for key in try store.keys() { found[key] = try store.get(key) }
            try store.close()
            XCTAssertEqual(found.count, expected.count, name)
            XCTAssertTrue(found == expected, "\(name): the values read differ from those written")
        }
    }

    /// Strictness where the reader skips ahead: a raw control character, invalid UTF-8 and an
    /// unclosed string past the first eight bytes of a string are each found at their column; a
    /// field name is read as JSON (an escape in it counts, so a second "value" spelt with one is a
    /// duplicate); a name of a field's length that is not the field is unknown.
    func testImportStaysStrictPastTheFastPaths() throws {
        let head = #"{"key":"k","value":""#  // 20 bytes: the value's text starts at column 21
        let plain = String(repeating: "a", count: 20)
        let cases: [([UInt8], String)] = [
            (Array((head + plain).utf8) + [0x01] + Array("\"}".utf8), "not valid JSON: a raw control character (byte 0x01) in a string; escape it at column 41"),
            (Array((head + plain).utf8) + [0xFF] + Array((plain + "\"}").utf8), "not valid UTF-8 (byte 0xFF) at column 41"),
            (Array((head + plain).utf8) + [0xE2, 0x82] + Array("\"}".utf8), "not valid UTF-8 (byte 0x22) at column 43"),
            (Array((head + plain + #"\"more"#).utf8), "not valid JSON: a string is not closed at column 43"),
            (Array(#"{"key":"k","value":"v","valu\u0065":"w"}"#.utf8), #"the field "value" appears twice at column 24"#),
            (Array(#"{"kez":"k","value":"v"}"#.utf8), #"unknown field "kez" (a line has "key" or "keyBase64", "value" or "valueBase64", and may have "expiresAtMilliseconds")"#),
            (Array(#"{"key":"k","value":"v","expiresAtMillisecondz":1}"#.utf8), #"unknown field "expiresAtMillisecondz" (a line has "key" or "keyBase64", "value" or "valueBase64", and may have "expiresAtMilliseconds")"#),
        ]
        let dir = TemporaryDirectory("cask-transfer-strict")
        for (line, reason) in cases {
            let run = try cask(["import", dir.appending("store")], stdin: Data(Array("{\"key\":\"ok\",\"value\":\"1\"}\n".utf8) + line + [0x0A]))
            XCTAssertEqual(run.status, 65, String(decoding: line, as: UTF8.self))
            XCTAssertEqual(run.err, "Error: line 2 of standard input: \(reason); nothing was imported\n")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appending("store")))

        // An escape in a name is JSON's business: "k\u0065y" is "key".
        let run = try cask(["import", dir.appending("store")], stdin: Data(#"{"k\u0065y":"spelt","value":"with an escape"}"#.utf8))
        XCTAssertEqual(run.status, 0, run.err)
        XCTAssertEqual(try cask(["get", dir.appending("store"), "spelt"]).out, "with an escape")
    }
}

