import Foundation

// libFuzzer target: arbitrary bytes through PropertyListReader (XML or binary, by their first
// bytes). Reading may throw, never crash, hang or allocate without bound. For a file it accepts:
// the top-level names are distinct, every stored value nests at most maxNesting deep, and it
// encodes with the binary object coder and decodes back to an equal value (NaN equal to NaN).
// Built and run by Tools/fuzz.sh.

enum PropertyListFuzzer {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        guard let entries = try? PropertyListReader.readDictionary([UInt8](bytes)) else { return }
        var names: Set<String> = []
        for entry in entries {
            guard names.insert(entry.name).inserted else { fatalError("the reader returned the name '\(entry.name)' twice") }
            guard case .success(let value) = entry.value else { continue }
            guard depth(value) <= PropertyListReader.maxNesting else {
                fatalError("the reader returned a value nested \(depth(value)) deep, over \(PropertyListReader.maxNesting)")
            }
            let encoded: [UInt8]
            do { encoded = try ObjectCoder.binary.encode(value) } catch {
                fatalError("a value the reader accepted does not encode: \(error)")
            }
            let decoded: PropertyListValue
            do { decoded = try ObjectCoder.binary.decode(PropertyListValue.self, from: encoded) } catch {
                fatalError("the encoding of a value the reader accepted does not decode: \(error)")
            }
            guard same(decoded, value) else { fatalError("a value the reader accepted decodes back differently") }
            // What import-defaults stores: the Swift value, when the value has one.
            guard let typed = try? value.typedValue() else { continue }
            do { _ = try ObjectCoder.binary.encode(typed) } catch {
                fatalError("the Swift value of a value the reader accepted does not encode: \(error)")
            }
        }
    }

    /// The nesting of arrays and dictionaries (a leaf is 0).
    private static func depth(_ value: PropertyListValue) -> Int {
        switch value {
        case .array(let values): 1 + (values.map(depth).max() ?? 0)
        case .dictionary(let values): 1 + (values.values.map(depth).max() ?? 0)
        default: 0
        }
    }

    /// `==`, except that NaN equals NaN (bit for bit).
    private static func same(_ a: PropertyListValue, _ b: PropertyListValue) -> Bool {
        switch (a, b) {
        case (.real(let x), .real(let y)): x.bitPattern == y.bitPattern
        case (.date(let x), .date(let y)): x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
        case (.array(let x), .array(let y)): x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (.dictionary(let x), .dictionary(let y)): x.count == y.count && x.allSatisfy { key, value in y[key].map { same(value, $0) } ?? false }
        default: a == b
        }
    }

    /// Property lists Foundation writes (XML and binary) of every type, and hand-built ones for
    /// what it never writes: 128-bit integers, a set, a UID, a shared array, deep nesting, entities.
    static func writeSeeds(to seeds: String) throws {
        let date = Date(timeIntervalSinceReferenceDate: 786_000_123)
        let everything: [String: Any] = [
            "string": "Ada <&> \"'", "empty": "", "long": String(repeating: "x", count: 40), "unicode": "värde 🔑",
            "int": 42, "negative": -7, "max": Int.max, "big": UInt64.max, "real": 0.1, "nan": Double.nan, "inf": Double.infinity,
            "true": true, "false": false, "date": date, "data": Data((0..<40).map { UInt8($0) }),
            "array": [1, "two", true, 3.5] as [Any], "shared": ["x", "x", "x"], "nested": ["a": ["b": [1, 2]]] as [String: Any],
            "emptyArray": [Any](), "emptyDictionary": [String: Any](),
        ]
        var files: [(String, [UInt8])] = []
        for (name, format) in [("foundation-xml", PropertyListSerialization.PropertyListFormat.xml), ("foundation-binary", .binary)] {
            files.append((name, [UInt8](try PropertyListSerialization.data(fromPropertyList: everything, format: format, options: 0))))
        }
        func bplist(_ objects: [[UInt8]]) -> [UInt8] {
            var bytes = Array("bplist00".utf8)
            var offsets: [Int] = []
            for object in objects {
                offsets.append(bytes.count)
                bytes += object
            }
            let table = bytes.count
            for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
            bytes += [0, 0, 0, 0, 0, 0, 2, 1]
            for field in [UInt64(objects.count), 0, UInt64(table)] { bytes += (0..<8).map { UInt8(field >> (56 - 8 * $0) & 0xFF) } }
            return bytes
        }
        let key: [UInt8] = [0x51, 0x61]
        files.append(("int128", bplist([[0xD1, 1, 2], key, [0x14, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5]])))
        files.append(("set", bplist([[0xD1, 1, 2], key, [0xC1, 3], [0x10, 1]])))
        files.append(("uid", bplist([[0xD1, 1, 2], key, [0x80, 1]])))
        files.append(("shared", bplist([[0xD1, 1, 2], key, [0xA2, 3, 3], [0xA2, 4, 4], [0x5F, 0x10, 3, 0x61, 0x62, 0x63]])))
        files.append(("utf16", bplist([[0xD1, 1, 2], key, [0x62, 0xD8, 0x3D, 0xDD, 0x11]])))
        let deep = String(repeating: "<array>", count: 130) + "<true/>" + String(repeating: "</array>", count: 130)
        files.append(("deep-xml", Array("<plist><dict><key>d</key>\(deep)</dict></plist>".utf8)))
        files.append(("text-xml", Array("""
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><!-- c --><dict><key>a&amp;b</key><string>&lt;&#65;&#x1F511;<![CDATA[x<y]]></string>
            <key>i</key><integer>0x1F</integer><key>big</key><integer>18446744073709551621</integer>
            <key>r</key><real>-2.5e3</real><key>d</key><data>AQID BA==</data><key>e</key><string/>
            <key>t</key><date>2025-11-28T10:02:03Z</date></dict></plist>
            """.utf8)))
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: seeds + "/" + name)) }
    }
}
