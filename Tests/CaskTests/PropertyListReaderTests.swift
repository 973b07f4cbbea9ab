import Foundation
import XCTest
@testable import Cask

/// ``PropertyListReader``: round trips against what Foundation writes, and hand-built binary and XML
/// property lists for everything a correct writer never produces, each error message pinned.
final class PropertyListReaderTests: XCTestCase {
    typealias Reader = PropertyListReader

    // MARK: Helpers

    /// A binary property list of `objects` (each its bytes, in order), with 2-byte offsets.
    static func bplist(_ objects: [[UInt8]], top: UInt64 = 0, refSize: UInt8 = 1) -> [UInt8] {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(bytes.count)
            bytes += object
        }
        let table = bytes.count
        for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
        bytes += [0, 0, 0, 0, 0, 0, 2, refSize]
        for field in [UInt64(objects.count), top, UInt64(table)] { bytes += (0..<8).map { UInt8(field >> (56 - 8 * $0) & 0xFF) } }
        return bytes
    }

    /// A binary `{"a": <object 2>}` followed by `rest` (objects 2, 3, …).
    static func single(_ rest: [UInt8]...) -> [UInt8] {
        bplist([[0xD1, 1, 2], [0x51, UInt8(ascii: "a")]] + rest)
    }

    /// The 16-byte binary integer object of `value`.
    static func int128(_ value: Int128) -> [UInt8] {
        [0x14] + (0..<16).map { UInt8(truncatingIfNeeded: value >> (120 - 8 * $0)) }
    }

    static func xml(_ body: String) -> [UInt8] {
        Array("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<dict>\n\(body)\n</dict>\n</plist>\n".utf8)
    }

    /// The entries as a dictionary, each a value or the description of why it was skipped.
    func read(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> [String: String] {
        var result: [String: String] = [:]
        for entry in try Reader.readDictionary(bytes) {
            switch entry.value {
            case .success(let value): result[entry.name] = "\(value)"
            case .failure(let error): result[entry.name] = "skip: \(error)"
            }
        }
        return result
    }

    func values(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> [String: PropertyListValue] {
        var result: [String: PropertyListValue] = [:]
        for entry in try Reader.readDictionary(bytes) {
            result[entry.name] = try entry.value.get()
        }
        return result
    }

    func assertError(_ bytes: [UInt8], _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let entries = try Reader.readDictionary(bytes)
            XCTFail("read \(entries.count) entries, expected: \(message)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.description, message, file: file, line: line)
        }
    }

    // MARK: Round trips

    private static let date = Date(timeIntervalSinceReferenceDate: 786_000_123)

    private static var everything: (object: [String: Any], value: [String: PropertyListValue]) {
        let bytes = Data((0..<200).map { UInt8($0 & 0xFF) })
        let many = (0..<40).map { $0 * 1000 }
        let object: [String: Any] = [
            "string": "Ada <&> \"'", "empty": "", "long": String(repeating: "x", count: 100), "unicode": "värde 🔑 ключ",
            "zero": 0, "small": 7, "byte": 255, "short": 65535, "int32": 1 << 31, "max": Int.max, "min": Int.min, "negative": -1,
            "real": 0.1, "whole": 1.0, "negativeZero": -0.0, "infinity": Double.infinity, "minusInfinity": -Double.infinity,
            "true": true, "false": false, "date": date, "data": bytes, "emptyData": Data(),
            "array": [1, "two", true, 3.5, Data([9]), date] as [Any], "many": many, "emptyArray": [Any](),
            "nested": ["inner": ["deep": [false, 0, ["k": date]]], "42": "int-like key"] as [String: Any],
            "emptyDictionary": [String: Any](), "ключ 🔑": "unicode key",
        ]
        let value: [String: PropertyListValue] = [
            "string": .string("Ada <&> \"'"), "empty": .string(""), "long": .string(String(repeating: "x", count: 100)),
            "unicode": .string("värde 🔑 ключ"),
            "zero": .integer(0), "small": .integer(7), "byte": .integer(255), "short": .integer(65535), "int32": .integer(1 << 31),
            "max": .integer(.max), "min": .integer(.min), "negative": .integer(-1),
            "real": .real(0.1), "whole": .real(1.0), "negativeZero": .real(-0.0), "infinity": .real(.infinity),
            "minusInfinity": .real(-.infinity), "true": .bool(true), "false": .bool(false), "date": .date(date),
            "data": .data(bytes), "emptyData": .data(Data()),
            "array": .array([.integer(1), .string("two"), .bool(true), .real(3.5), .data(Data([9])), .date(date)]),
            "many": .array(many.map { .integer($0) }), "emptyArray": .array([]),
            "nested": .dictionary(["inner": .dictionary(["deep": .array([.bool(false), .integer(0), .dictionary(["k": .date(date)])])]),
                                   "42": .string("int-like key")]),
            "emptyDictionary": .dictionary([:]), "ключ 🔑": .string("unicode key"),
        ]
        return (object, value)
    }

    func testReadsWhatFoundationWritesXMLAndBinary() throws {
        let (object, expected) = Self.everything
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let bytes = [UInt8](try PropertyListSerialization.data(fromPropertyList: object, format: format, options: 0))
            let entries = try Reader.readDictionary(bytes)
            XCTAssertEqual(entries.count, expected.count, "\(format)")
            let values = try values(bytes)
            for (name, value) in expected { XCTAssertEqual(values[name], value, "\(format): \(name)") }
            // And back through the binary object coder.
            for (name, value) in values {
                XCTAssertEqual(try ObjectCoder.binary.decode(PropertyListValue.self, from: ObjectCoder.binary.encode(value)), value, name)
            }
        }
        // NaN, which equals nothing.
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let bytes = [UInt8](try PropertyListSerialization.data(fromPropertyList: ["nan": Double.nan], format: format, options: 0))
            guard case .real(let nan)? = try values(bytes)["nan"] else { return XCTFail("no real") }
            XCTAssertTrue(nan.isNaN)
        }
    }

    // MARK: Binary: integers

    func testBinary128BitIntegersOutsideIntAreSkippedNotCut() throws {
        let range = "outside Int's range (-9223372036854775808 ... 9223372036854775807)"
        for (value, text) in [(Int128(1) << 64 + 5, "18446744073709551621"), (Int128(1) << 100, "1267650600228229401496703205376"),
                              (-(Int128(1) << 64), "-18446744073709551616"), (Int128(1) << 63, "9223372036854775808")] {
            XCTAssertEqual(try read(Self.single(Self.int128(value))), ["a": "skip: integer \(text) is \(range)"])
        }
        // Nested: the path inside the entry; the other entries are read.
        let nested = Self.bplist([[0xD2, 1, 2, 3, 4], [0x51, 0x61], [0x51, 0x62], [0xA2, 5, 6], [0x10, 7], [0x10, 1], Self.int128(Int128(1) << 64)])
        XCTAssertEqual(try read(nested), ["a": "skip: integer 18446744073709551616 is \(range) at [1]", "b": "integer(7)"])
        // What fits is read, whatever its width.
        for value in [Int128(5), -5, Int128(Int.max), Int128(Int.min)] {
            XCTAssertEqual(try values(Self.single(Self.int128(value))), ["a": .integer(Int(value))])
        }
        XCTAssertEqual(try values(Self.single([0x13, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE])), ["a": .integer(-2)])
        XCTAssertEqual(try values(Self.single([0x12, 0xFF, 0xFF, 0xFF, 0xFE])), ["a": .integer(0xFFFF_FFFE)])
        XCTAssertEqual(try values(Self.single([0x11, 0xFF, 0xFE])), ["a": .integer(0xFFFE)])
        assertError(Self.single([0x15, 0]), "binary property list, object 2 at byte 13: an integer of 32 bytes; integers are 1, 2, 4, 8 or 16 bytes")
        assertError(Self.single([0x13, 0, 0]), "binary property list, object 2 at byte 13: an integer needs 8 bytes after its marker, but the objects end 2 bytes later")
    }

    // MARK: Binary: what is not a property-list type

    func testBinarySetsUIDsNullsAndFillAreRejected() {
        // A set at the top level, nested in an array, and empty.
        assertError(Self.bplist([[0xC1, 1], [0x10, 1]]), "binary property list, object 0 at byte 8: the top level is a set, not a dictionary")
        assertError(Self.single([0xA1, 3], [0xC2, 4, 4], [0x10, 1]), "binary property list, object 3 at byte 15: a set (marker 0xC2), not a property-list type")
        assertError(Self.single([0xC0]), "binary property list, object 2 at byte 13: a set (marker 0xC0), not a property-list type")
        assertError(Self.single([0x80, 1]), "binary property list, object 2 at byte 13: a keyed-archiver UID (marker 0x80), not a property-list type")
        assertError(Self.single([0x00]), "binary property list, object 2 at byte 13: a null (marker 0x00), not a property-list type")
        assertError(Self.single([0x0F]), "binary property list, object 2 at byte 13: a fill byte (marker 0x0F), not an object")
        assertError(Self.single([0x70]), "binary property list, object 2 at byte 13: marker 0x70 is not a binary property-list object")
        assertError(Self.single([0x34, 0]), "binary property list, object 2 at byte 13: marker 0x34 is not a binary property-list object (a date is 0x33)")
        assertError(Self.bplist([[0xD1, 1, 2], [0x10, 1], [0x10, 2]]), "binary property list, object 0 at byte 8: a dictionary key is an integer (object 1 at byte 11), not a string")
    }

    func testBinaryStringsAreChecked() throws {
        XCTAssertEqual(try values(Self.single([0x62, 0xD8, 0x3D, 0xDD, 0x11])), ["a": .string("🔑")])
        assertError(Self.single([0x52, 0x61, 0xE9]), "binary property list, object 2 at byte 13: an ASCII string holds byte 0xE9 at byte 15")
        assertError(Self.single([0x61, 0xD8, 0x3D]), "binary property list, object 2 at byte 13: a UTF-16 string has a lead surrogate 0xD83D without its trail surrogate at byte 14")
        assertError(Self.single([0x61, 0xDD, 0x11]), "binary property list, object 2 at byte 13: a UTF-16 string has a trail surrogate 0xDD11 without a lead surrogate at byte 14")
        // A count in an integer object after the marker.
        XCTAssertEqual(try values(Self.single([0x5F, 0x10, 3] + Array("abc".utf8))), ["a": .string("abc")])
        assertError(Self.single([0x5F, 0x20, 3]), "binary property list, object 2 at byte 13: the count after marker 0x5F is not an integer of 1 to 8 bytes (marker 0x20)")
        assertError(Self.single([0x5F, 0x13, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), "binary property list, object 2 at byte 13: a negative count -1")
        assertError(Self.single([0x4F, 0x12, 0x7F, 0xFF, 0xFF, 0xFF]), "binary property list, object 2 at byte 13: data of 2147483647 bytes does not fit in the 0 bytes before the offset table")
    }

    // MARK: Binary: structure

    func testBinaryTrailerOffsetsAndTruncation() throws {
        assertError(Array("bplist00".utf8), "a binary property list of 8 bytes: too short for the 8-byte header and the 32-byte trailer (40 bytes)")
        assertError(Array("bplist15".utf8) + [UInt8](repeating: 0, count: 40), "a binary property list of version '15'; only version 00 (bplist00) is read")
        let good = Self.single([0x10, 1])
        XCTAssertEqual(try values(good), ["a": .integer(1)])
        // Cut anywhere: an error, never a crash.
        for length in 0..<good.count {
            XCTAssertThrowsError(try Reader.readDictionary(Array(good.prefix(length))), "\(length) bytes")
        }
        func patched(_ at: Int, _ bytes: [UInt8]) -> [UInt8] {
            var copy = good
            copy.replaceSubrange((good.count - 32 + at)..<(good.count - 32 + at + bytes.count), with: bytes)
            return copy
        }
        let trailer = good.count - 32
        assertError(patched(6, [0]), "binary property list, byte \(trailer + 6): trailer: offset size 0 is not 1 to 8 bytes")
        assertError(patched(7, [9]), "binary property list, byte \(trailer + 7): trailer: object reference size 9 is not 1 to 8 bytes")
        assertError(patched(8, [0, 0, 0, 0, 0, 0, 0, 4]), "binary property list, byte \(trailer + 8): trailer: 4 objects, but the offset table (6 bytes from byte 15) holds 3 offsets of 2 bytes")
        assertError(patched(8, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), "binary property list, byte \(trailer + 8): trailer: 18446744073709551615 objects, but the offset table (6 bytes from byte 15) holds 3 offsets of 2 bytes")
        assertError(patched(16, [0, 0, 0, 0, 0, 0, 0, 3]), "binary property list, byte \(trailer + 16): trailer: the top object 3 is not one of the 3 objects")
        assertError(patched(24, [0, 0, 0, 0, 0, 0, 0xFF, 0]), "binary property list, byte \(trailer + 24): trailer: the offset table's offset 65280 is not between the objects (from byte 9) and the trailer (byte \(trailer))")
        // An offset outside the objects; a reference to an object that is not there.
        var bad = good
        bad[17] = 0x10
        assertError(bad, "binary property list, byte 17: the offset table gives object 1 the offset 4107, outside the objects (bytes 8 to 14)")
        bad = good
        bad[10] = 7
        assertError(bad, "binary property list, byte 10: object 0 refers to object 7, but there are 3 objects")
        // A dictionary longer than the bytes there.
        bad = good
        bad[8] = 0xDE
        assertError(bad, "binary property list, object 0 at byte 8: a dictionary of 14 elements does not fit in the 6 bytes before the offset table")
    }

    func testBinaryCyclesDuplicateKeysAndSharedObjects() throws {
        // An array that holds itself; the top dictionary referenced from inside.
        assertError(Self.single([0xA1, 2]), "binary property list, object 2 at byte 13: the array contains itself (a reference cycle)")
        assertError(Self.single([0xA1, 0]), "binary property list, object 0 at byte 8: the dictionary contains itself (a reference cycle)")
        assertError(Self.bplist([[0xD2, 1, 1, 2, 2], [0x51, 0x61], [0x10, 1]]), "binary property list, object 0 at byte 8: the dictionary has the key 'a' twice")
        assertError(Self.single([0xD2, 3, 3, 4, 4], [0x51, 0x6B], [0x09]), "binary property list, object 2 at byte 13: the dictionary has the key 'k' twice")
        // Sharing is fine: the same array twice, not a cycle.
        XCTAssertEqual(try values(Self.single([0xA2, 3, 3], [0xA1, 4], [0x09])), ["a": .array([.array([.bool(true)]), .array([.bool(true)])])])
        // 40 levels of [previous, previous]: 2^40 values; refused at the limit.
        var objects: [[UInt8]] = [[0xD1, 1, 2], [0x51, 0x61]]
        for level in 0..<40 { objects.append([0xA2, UInt8(3 + level), UInt8(3 + level)]) }
        objects.append([0x09])
        let dag = Self.bplist(objects)
        assertError(dag, "binary property list, object 41 at byte 130: the file expands to more than 65536 values (shared objects referenced over and over); refused")
    }

    // MARK: Nesting

    func testNestingBeyondTheCoderIsSkippedAndBeyondTheReaderRefused() throws {
        XCTAssertEqual(Reader.maxNesting, 127)
        func xmlNested(_ depth: Int) -> [UInt8] {
            Self.xml("<key>deep</key>" + String(repeating: "<array>", count: depth) + "<true/>" + String(repeating: "</array>", count: depth) + "<key>b</key><true/>")
        }
        func binaryNested(_ depth: Int) -> [UInt8] {
            var objects: [[UInt8]] = [[0xD1, 1, 2], [0x54] + Array("deep".utf8)]
            for level in 0..<depth { objects.append(level == depth - 1 ? [0xA1, UInt8(2 + depth)] : [0xA1, UInt8(3 + level)]) }
            objects.append([0x09])
            return Self.bplist(objects, refSize: 1)
        }
        // 127 deep: read, and it encodes and decodes with every coder.
        var value = PropertyListValue.bool(true)
        for _ in 0..<127 { value = .array([value]) }
        for bytes in [xmlNested(127), binaryNested(127)] {
            let read = try XCTUnwrap(try Reader.readDictionary(bytes).first { $0.name == "deep" })
            XCTAssertEqual(try read.value.get(), value)
            for coder in [ObjectCoder.binary, .json, .propertyList] {
                XCTAssertEqual(try coder.decode(PropertyListValue.self, from: coder.encode(value)), value, "\(coder)")
            }
        }
        // One more does not encode with the binary coder; the reader skips it.
        XCTAssertThrowsError(try ObjectCoder.binary.encode(PropertyListValue.array([value])))
        let skip = "skip: containers are nested more than 127 deep, more than the object coder can store"
        XCTAssertEqual(try read(xmlNested(128)), ["deep": skip, "b": "bool(true)"])
        XCTAssertEqual(try read(binaryNested(128)), ["deep": skip])
        XCTAssertEqual(try read(xmlNested(511)), ["deep": skip, "b": "bool(true)"])
        assertError(xmlNested(512), "XML property list, line 4, column \(16 + 511 * 7): containers are nested more than 512 deep, more than this reader follows")
    }

    // MARK: XML

    func testXMLDataIsStrictBase64() throws {
        XCTAssertEqual(try values(Self.xml("<key>d</key><data>\n\tAQID\n\tBA==\n</data>")), ["d": .data(Data([1, 2, 3, 4]))])
        XCTAssertEqual(try values(Self.xml("<key>d</key><data>A Q I D B A U =</data><key>e</key><data/><key>f</key><data></data>")),
                       ["d": .data(Data([1, 2, 3, 4, 5])), "e": .data(Data()), "f": .data(Data())])
        assertError(Self.xml("<key>d</key><data>AQ!D</data>"), "XML property list, line 4, column 21: '!' in <data> is not a base64 character")
        assertError(Self.xml("<key>d</key><data>AQ-_</data>"), "XML property list, line 4, column 21: '-' in <data> is not a base64 character")
        assertError(Self.xml("<key>d</key><data>AQ&#65;D</data>"), "XML property list, line 4, column 21: '&' in <data> is not a base64 character")
        assertError(Self.xml("<key>d</key><data>AQ</data>"), "XML property list, line 4, column 20: base64 in <data> ends after 2 characters, not a multiple of 4 (the padding '=' is required)")
        assertError(Self.xml("<key>d</key><data>AR==</data>"), "XML property list, line 4, column 22: base64 in <data> is not canonical: the unused bits before '==' are not zero")
        assertError(Self.xml("<key>d</key><data>AQN=</data>"), "XML property list, line 4, column 22: base64 in <data> is not canonical: the unused bits before '=' are not zero")
        assertError(Self.xml("<key>d</key><data>A===</data>"), "XML property list, line 4, column 20: '=' in <data> where base64 has no padding")
        assertError(Self.xml("<key>d</key><data>AQ==AQ==</data>"), "XML property list, line 4, column 23: base64 in <data> goes on after its padding '='")
        assertError(Self.xml("<key>d</key><data>AQI=A</data>"), "XML property list, line 4, column 23: base64 in <data> goes on after its padding '='")
    }

    func testXMLIntegersRealsAndDates() throws {
        let range = "outside Int's range (-9223372036854775808 ... 9223372036854775807)"
        XCTAssertEqual(try values(Self.xml("""
            <key>a</key><integer>-9223372036854775808</integer><key>b</key><integer>+12</integer>
            <key>c</key><integer>0x1F</integer><key>d</key><integer>-0x10</integer><key>e</key><integer>007</integer>
            """)), ["a": .integer(.min), "b": .integer(12), "c": .integer(31), "d": .integer(-16), "e": .integer(7)])
        XCTAssertEqual(try read(Self.xml("""
            <key>big</key><integer>18446744073709551621</integer><key>ok</key><integer>1</integer>
            <key>max1</key><integer>9223372036854775808</integer><key>min1</key><integer>-9223372036854775809</integer>
            <key>nested</key><dict><key>list</key><array><integer>1</integer><integer>0x10000000000000000</integer></array></dict>
            """)), [
                "big": "skip: integer 18446744073709551621 is \(range)", "ok": "integer(1)",
                "max1": "skip: integer 9223372036854775808 is \(range)", "min1": "skip: integer -9223372036854775809 is \(range)",
                "nested": "skip: integer 0x10000000000000000 is \(range) at list[1]",
            ])
        assertError(Self.xml("<key>a</key><integer> 5</integer>"), "XML property list, line 4, column 13: <integer> holds ' 5', not a decimal or 0x hexadecimal integer")
        assertError(Self.xml("<key>a</key><integer>1.5</integer>"), "XML property list, line 4, column 13: <integer> holds '1.5', not a decimal or 0x hexadecimal integer")
        assertError(Self.xml("<key>a</key><integer></integer>"), "XML property list, line 4, column 13: an empty <integer>")
        assertError(Self.xml("<key>a</key><integer>0x</integer>"), "XML property list, line 4, column 13: <integer> holds '0x', not a decimal or 0x hexadecimal integer")

        let reals = try values(Self.xml("""
            <key>a</key><real>1.5</real><key>b</key><real>-2e3</real><key>c</key><real>.25</real><key>d</key><real>+infinity</real>
            <key>e</key><real>-inf</real><key>f</key><real>3.</real>
            """))
        XCTAssertEqual(reals, ["a": .real(1.5), "b": .real(-2000), "c": .real(0.25), "d": .real(.infinity), "e": .real(-.infinity), "f": .real(3)])
        guard case .real(let nan)? = try values(Self.xml("<key>n</key><real>nan</real>"))["n"] else { return XCTFail("no NaN") }
        XCTAssertTrue(nan.isNaN)
        for text in ["0x1p3", "1e", "", "1,5", "e5"] {
            assertError(Self.xml("<key>a</key><real>\(text)</real>"), "XML property list, line 4, column 13: <real> holds '\(text)', not a decimal number, nan or infinity")
        }

        XCTAssertEqual(try values(Self.xml("<key>d</key><date>2025-11-28T10:02:03Z</date><key>e</key><date>2000-02-29T23:59:59Z</date>")),
                       ["d": .date(Date(timeIntervalSince1970: 1_764_324_123)), "e": .date(Date(timeIntervalSince1970: 951_868_799))])
        for text in ["2025-11-28", "2025-11-28T10:02:03", "2025-13-01T00:00:00Z", "2023-02-29T00:00:00Z", "2025-11-28T24:00:00Z", "2025-11-28T10:02:03.5Z"] {
            assertError(Self.xml("<key>d</key><date>\(text)</date>"), "XML property list, line 4, column 13: <date> holds '\(text)', not a date YYYY-MM-DDTHH:MM:SSZ")
        }
    }

    func testXMLTextEntitiesAndCDATA() throws {
        XCTAssertEqual(try values(Self.xml("""
            <key>a&amp;b</key><string>&lt;&gt;&amp;&quot;&apos; &#65;&#x1F511;</string>
            <key>c</key><string><![CDATA[x<y & z]]> and <!-- a comment --> more</string>
            <key>e</key><string/><key>f</key><string></string><key></key><true></true>
            """)), ["a&b": .string("<>&\"' A🔑"), "c": .string("x<y & z and  more"), "e": .string(""), "f": .string(""), "": .bool(true)])
        assertError(Self.xml("<key>a</key><string>&#xD800;</string>"), "XML property list, line 4, column 21: '&#xD800;' is not a Unicode scalar")
        assertError(Self.xml("<key>a</key><string>&#x110000;</string>"), "XML property list, line 4, column 21: '&#x110000;' is not a Unicode scalar")
        assertError(Self.xml("<key>a</key><string>&nbsp;</string>"), "XML property list, line 4, column 21: unknown entity '&nbsp;' (property lists use &lt; &gt; &amp; &quot; &apos; and &#…;)")
        assertError(Self.xml("<key>a</key><string>a & b</string>"), "XML property list, line 4, column 23: '&' that starts no entity (write &amp; for an ampersand)")
        assertError(Self.xml("<key>a</key><string>x<b>y</b></string>"), "XML property list, line 4, column 22: <b> inside <string>, which holds only text")
        assertError(Self.xml("<key>a</key><string><![CDATA[x</string>"), "XML property list, line 4, column 21: a CDATA section that never ends (no ']]>')")
    }

    func testXMLStructureErrorsNameLineAndColumn() throws {
        assertError(Self.xml("<key>a</key><integer>1</integer><key>a</key><integer>2</integer>"), "XML property list, line 4, column 33: the dictionary has the key 'a' twice")
        assertError(Self.xml("<key>n</key><dict><key>a</key><true/><key>a</key><false/></dict>"), "XML property list, line 4, column 38: the dictionary has the key 'a' twice")
        assertError(Self.xml("<key>a</key>"), "XML property list, line 5, column 1: the key 'a' has no value")
        assertError(Self.xml("<key>a</key><foo/>"), "XML property list, line 4, column 13: <foo> is not a property-list element")
        assertError(Self.xml("<integer>1</integer>"), "XML property list, line 4, column 1: <integer> where a <key> was expected in <dict>")
        assertError(Self.xml("hello<key>a</key><true/>"), "XML property list, line 4, column 1: text 'hello' where an element was expected in <dict>")
        assertError(Self.xml("<key>a</key><array><true/></dict>"), "XML property list, line 4, column 27: </dict> closes <array> (opened at line 4, column 13)")
        assertError(Self.xml("<key>a</key><string x=\"1\">v</string>"), "XML property list, line 4, column 13: <string> has attributes; only <plist> takes any")
        assertError(Self.xml("<key>a</key><true>yes</true>"), "XML property list, line 4, column 19: <true> holds text 'yes'; it must be empty")
        assertError(Self.xml("<key>a</key><key>b</key>"), "XML property list, line 4, column 13: a <key> outside a <dict>")
        assertError(Self.xml("<key>a</key><true/>") + Array("junk".utf8), "XML property list, line 7, column 1: text 'junk' after the end of the document's element")
        assertError(Array("<plist><dict><key>a</key><true/>".utf8), "XML property list, line 1, column 33: the file ends inside <dict> (opened at line 1, column 8)")
        assertError(Array("<plist><array/></plist>".utf8), "XML property list, line 1, column 8: the top level is <array>, not a dictionary")
        assertError(Array("<plist></plist>".utf8), "XML property list, line 1, column 8: the <plist> element holds no value")
        assertError(Array("<plist><dict/><dict/></plist>".utf8), "XML property list, line 1, column 15: a second value in <plist>, which holds one")
        assertError(Array("<plist><dict><key>a</key><string>\u{FF}</string></dict></plist>".utf8.map { $0 == 0xC3 ? 0xFF : $0 }),
                    "XML property list, line 1, column 34: byte 0xFF is not valid UTF-8 (1 byte)")
        // A bare <dict> as the document's element, as CoreFoundation reads it; comments, a BOM and a DOCTYPE.
        XCTAssertEqual(try values(Array("<dict><key>a</key><true/></dict>".utf8)), ["a": .bool(true)])
        XCTAssertEqual(try values([0xEF, 0xBB, 0xBF] + Array("<?xml version=\"1.0\"?><!-- c --><!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"x.dtd\"><plist version=\"1.0\"><!-- c --><dict/></plist><!-- end -->\n".utf8)), [:])
    }

    func testFormatsThatAreNotReadAreNamed() {
        assertError([], "the file is empty")
        assertError(Array(" \n".utf8), "the file holds only white space")
        assertError(Array("{ a = 1; }".utf8), "it starts with '{': an OpenStep (text) property list or JSON; only XML and binary property lists are read")
        assertError(Array("( 1, 2 )".utf8), "it starts with '(': an OpenStep (text) property list or JSON; only XML and binary property lists are read")
        assertError(Array("hello".utf8), "it starts with byte 0x68, not '<' (XML) nor 'bplist00' (binary): not a property list")
        assertError([0xFF, 0xFE, 0x3C, 0], "the file is UTF-16 or UTF-32 text (it starts with bytes 0xFF 0xFE); only UTF-8 XML property lists are read")
        assertError(Array("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><plist><dict/></plist>".utf8),
                    "XML property list, line 1, column 1: the XML declaration gives the encoding 'ISO-8859-1'; only UTF-8 XML property lists are read")
    }

    // MARK: PropertyListValue(propertyList:)

    func testConversionOfASetThrowsInsteadOfCrashing() {
        XCTAssertThrowsError(try PropertyListValue(propertyList: NSSet(array: [1, 2]))) { error in
            XCTAssertEqual("\(error)", "a set is not a property-list type")
        }
        XCTAssertThrowsError(try PropertyListValue(propertyList: ["list": [1, NSSet(array: ["x"])]] as [String: Any])) { error in
            XCTAssertEqual("\(error)", "a set is not a property-list type at list[1]")
        }
        XCTAssertThrowsError(try PropertyListValue(propertyList: Set([1, 2]))) { error in
            XCTAssertEqual("\(error)", "a set is not a property-list type")
        }
        XCTAssertEqual(try PropertyListValue(propertyList: ["a": [1]] as [String: Any]), .dictionary(["a": .array([.integer(1)])]))
    }
}
