import Foundation
import Synchronization
import XCTest
@testable import Cask
import CaskTestSupport

/// `cask import-defaults` (the built binary) stores each entry as its Swift value, so typed keys and
/// `get(T.self, forKey:)` of the natural type read it (issue 23, item 10), with every coder and from
/// XML and binary property lists; an entry of mixed kinds reads as a ``PropertyListValue``.
final class ToolImportDefaultsTypedTests: XCTestCase {
    /// Whole seconds: XML property lists keep no fractions of a second.
    private static let date = Date(timeIntervalSinceReferenceDate: 786_000_123)
    private static let later = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// What a `UserDefaults` domain of an app holds.
    private static var defaults: [String: Any] { [
        "darkMode": true,
        "sounds": false,
        "fontSize": 14,
        "lowest": Int64.min,
        "small": 200,
        "zoom": 1.5,
        "whole": 2.0,
        "name": "Ada Lovelace",
        "nothing": "",
        "lastLaunch": date,
        "token": Data([0, 1, 0xFF, 0x7F]),
        "recent": ["a.txt", "b.txt", "ключ 🔑"],
        "limits": ["small": 10, "large": 20, "42": 42, "042": -1] as [String: Int],
        "history": [date, later],
        "switches": [true, false, true],
        "blobs": [Data([1]), Data()],
        "ratios": [0.25, 3.0],
        "windows": ["main": ["x": 1.5, "y": 2.5], "inspector": [String: Double]()] as [String: [String: Double]],
        "grid": [[1, 2], [], [3]] as [[Int]],
        "tags": [String](),
        "byName": [String: Any](),
        "mixed": [1, "two", true] as [Any],
        "mixedNumbers": ["a": 1, "b": 2.5] as [String: Any],
        "mixedInside": ["rows": [[1], ["x"]]] as [String: Any],
    ] }

    /// The entries stored as `PropertyListValue`s, with what the output says of each.
    private static let mixed: [(name: String, value: PropertyListValue, reason: String)] = [
        ("mixed", .array([.integer(1), .string("two"), .bool(true)]), "the array mixes integer and string values"),
        ("mixedInside", .dictionary(["rows": .array([.array([.integer(1)]), .array([.string("x")])])]),
         "the array mixes array of integer and array of string values at rows"),
        ("mixedNumbers", .dictionary(["a": .integer(1), "b": .real(2.5)]), "the dictionary mixes integer and real values"),
    ]

    /// The entries that are neither containers nor data, with their kinds: the plist coder cannot
    /// store them (PropertyListEncoder refuses a bare one, and so does `store.set`).
    private static let bare: [(name: String, kind: String)] = [
        ("darkMode", "boolean"), ("fontSize", "integer"), ("lastLaunch", "date"), ("lowest", "integer"), ("name", "string"),
        ("nothing", "string"), ("small", "integer"), ("sounds", "boolean"), ("whole", "real"), ("zoom", "real"),
    ]

    /// Every coder the tool supports, by its `--coder` name.
    private static let coders: [(option: String, coder: ObjectCoder)] = [("binary", .binary), ("json", .json), ("plist", .propertyList)]

    func testImportedEntriesReadAsTheirSwiftTypesThroughTypedKeysAndGet() throws {
        let root = TemporaryDirectory("cask-import-typed")
        for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
            let file = root.appending("defaults-\(format.rawValue).plist")
            try PropertyListSerialization.data(fromPropertyList: Self.defaults, format: format, options: 0).write(to: URL(fileURLWithPath: file))
            for (option, coder) in Self.coders {
                let context = "\(format == .xml ? "XML" : "binary") plist, \(option) coder"
                let directory = root.appending("store-\(format.rawValue)-\(option)")
                let run = try ToolTests.cask(["import-defaults", directory, file, "--prefix", "defaults/", "--coder", option])
                let skipped = coder == .propertyList ? Self.bare : []
                XCTAssertEqual(run.status, skipped.isEmpty ? 0 : 65, "\(context): \(run.out) \(run.err)")
                XCTAssertEqual(run.err, "", context)
                var expected = """
                    Imported \(Self.defaults.count - skipped.count) entries from \(file) into \(directory) (\(option) coder, keys 'defaults/' + entry name).
                    Stored 3 entries as PropertyListValue (values of mixed kinds, no Swift type of their own):
                    \(Self.mixed.map { "  '\($0.name)': \($0.reason)" }.joined(separator: "\n"))

                    """
                if !skipped.isEmpty {
                    expected += "Skipped \(skipped.count) entries:\n" + skipped.map {
                        "  '\($0.name)': the plist coder cannot store a bare \($0.kind): PropertyListEncoder (and so store.set) refuses one outside an array or a dictionary; import with --coder binary or json\n"
                    }.joined()
                }
                XCTAssertEqual(run.out, expected, context)
                try checkTypedReads(directory, coder: coder, context: context)
            }
        }
    }

    /// Opens the store with `coder` as its object coder and reads every entry through typed keys
    /// and `get` of its natural type.
    private func checkTypedReads(_ directory: String, coder: ObjectCoder, context: String) throws {
        var options = CaskStore.Options(durability: .os, readOnly: true)
        options.objects.coder = coder
        let unreadable = Mutex<[String]>([])
        options.objects.onUnreadableValue = { key, error in unreadable.withLock { $0.append("\(key): \(error)") } }
        let store = try CaskStore.open(at: directory, options: options)
        defer { try? store.close() }
        func key<T>(_ name: String, _ fallback: T) -> CaskStore.Key<T> { CaskStore.Key<T>("defaults/" + name, default: fallback) }

        if coder == .propertyList {
            // Skipped: absent, so the typed keys read their defaults.
            XCTAssertEqual(store.count, Self.defaults.count - Self.bare.count, context)
            XCTAssertEqual(store[key("darkMode", false)], false, context)
            XCTAssertNil(try store.get(Int.self, forKey: "defaults/fontSize"), context)
        } else {
            XCTAssertEqual(store.count, Self.defaults.count, context)
            try checkBareValues(store, context: context)
        }
        XCTAssertEqual(store[key("recent", [String]())], ["a.txt", "b.txt", "ключ 🔑"], context)
        XCTAssertEqual(store[key("limits", [String: Int]())], ["small": 10, "large": 20, "42": 42, "042": -1], context)
        XCTAssertEqual(try store.value(for: key("windows", [String: [String: Float]]())), ["main": ["x": 1.5, "y": 2.5], "inspector": [:]], context)

        XCTAssertEqual(try store.get(Data.self, forKey: "defaults/token"), Data([0, 1, 0xFF, 0x7F]), context)
        XCTAssertEqual(try store.get([String].self, forKey: "defaults/recent"), ["a.txt", "b.txt", "ключ 🔑"], context)
        XCTAssertEqual(try store.get([String: Int].self, forKey: "defaults/limits"), ["small": 10, "large": 20, "42": 42, "042": -1], context)
        XCTAssertEqual(try store.get([Date].self, forKey: "defaults/history"), [Self.date, Self.later], context)
        XCTAssertEqual(try store.get([Bool].self, forKey: "defaults/switches"), [true, false, true], context)
        XCTAssertEqual(try store.get([Data].self, forKey: "defaults/blobs"), [Data([1]), Data()], context)
        XCTAssertEqual(try store.get([Double].self, forKey: "defaults/ratios"), [0.25, 3.0], context)
        XCTAssertEqual(try store.get([String: [String: Double]].self, forKey: "defaults/windows"),
                       ["main": ["x": 1.5, "y": 2.5], "inspector": [:]], context)
        XCTAssertEqual(try store.get([[Int]].self, forKey: "defaults/grid"), [[1, 2], [], [3]], context)
        // An empty container reads as one of any element type.
        XCTAssertEqual(try store.get([Int].self, forKey: "defaults/tags"), [], context)
        XCTAssertEqual(try store.get([String].self, forKey: "defaults/tags"), [], context)
        XCTAssertEqual(try store.get([String: Bool].self, forKey: "defaults/byName"), [:], context)

        // The bytes are exactly what `set` writes for the Swift value with that coder (dictionaries
        // aside: their order varies from one process to the next).
        func assertSetBytes<T: Encodable>(_ name: String, _ value: T) throws {
            XCTAssertEqual(try store.get("defaults/" + name), try coder.encode(value), "\(context): \(name)")
        }
        if coder != .propertyList {
            try assertSetBytes("darkMode", true)
            try assertSetBytes("fontSize", 14)
            try assertSetBytes("zoom", 1.5)
            try assertSetBytes("name", "Ada Lovelace")
            try assertSetBytes("lastLaunch", Self.date)
        }
        try assertSetBytes("token", Data([0, 1, 0xFF, 0x7F]))
        try assertSetBytes("recent", ["a.txt", "b.txt", "ключ 🔑"])
        try assertSetBytes("history", [Self.date, Self.later])
        try assertSetBytes("grid", [[1, 2], [], [3]])

        // Mixed kinds: a PropertyListValue, exactly.
        for entry in Self.mixed {
            XCTAssertEqual(try store.get(PropertyListValue.self, forKey: "defaults/" + entry.name), entry.value, "\(context): \(entry.name)")
        }
        XCTAssertEqual(unreadable.withLock { $0 }, [], context)
    }

    /// The entries that are neither containers nor data, through typed keys and `get`.
    private func checkBareValues(_ store: CaskStore, context: String) throws {
        func key<T>(_ name: String, _ fallback: T) -> CaskStore.Key<T> { CaskStore.Key<T>("defaults/" + name, default: fallback) }
        // The typed subscript, which cannot throw, and value(for:), which does.
        XCTAssertEqual(store[key("darkMode", false)], true, context)
        XCTAssertEqual(store[key("sounds", true)], false, context)
        XCTAssertEqual(store[key("fontSize", 0)], 14, context)
        XCTAssertEqual(try store.value(for: key("fontSize", 0)), 14, context)
        XCTAssertEqual(try store.value(for: key("lowest", 0)), Int.min, context)
        XCTAssertEqual(try store.value(for: key("zoom", 0.0)), 1.5, context)
        XCTAssertEqual(try store.value(for: key("whole", 0.0)), 2.0, context)
        XCTAssertEqual(store[key("name", "")], "Ada Lovelace", context)
        XCTAssertEqual(try store.value(for: CaskStore.Key<String?>("defaults/nothing")), "", context)
        XCTAssertEqual(store[key("lastLaunch", Date.distantPast)], Self.date, context)
        // get(T.self, forKey:), the other integer types where the value fits, and Float.
        XCTAssertEqual(try store.get(Bool.self, forKey: "defaults/darkMode"), true, context)
        XCTAssertEqual(try store.get(Int.self, forKey: "defaults/fontSize"), 14, context)
        XCTAssertEqual(try store.get(UInt8.self, forKey: "defaults/small"), 200, context)
        XCTAssertEqual(try store.get(Int16.self, forKey: "defaults/small"), 200, context)
        XCTAssertEqual(try store.get(UInt64.self, forKey: "defaults/small"), 200, context)
        XCTAssertEqual(try store.get(Int64.self, forKey: "defaults/lowest"), Int64.min, context)
        XCTAssertThrowsError(try store.get(Int8.self, forKey: "defaults/small"), context)  // 200 does not fit
        XCTAssertEqual(try store.get(Float.self, forKey: "defaults/zoom"), 1.5, context)
        XCTAssertEqual(try store.get(Double.self, forKey: "defaults/zoom"), 1.5, context)
        XCTAssertEqual(try store.get(String.self, forKey: "defaults/name"), "Ada Lovelace", context)
        XCTAssertEqual(try store.get(Date.self, forKey: "defaults/lastLaunch"), Self.date, context)
        // A boolean is not a number, nor a number a boolean.
        XCTAssertThrowsError(try store.get(Bool.self, forKey: "defaults/fontSize"), context)
        XCTAssertThrowsError(try store.get(Int.self, forKey: "defaults/darkMode"), context)

    }

    func testTheJSONReportListsTheEntriesStoredAsPropertyListValues() throws {
        let root = TemporaryDirectory("cask-import-typed")
        let file = root.appending("defaults.plist")
        try PropertyListSerialization.data(fromPropertyList: Self.defaults, format: .binary, options: 0).write(to: URL(fileURLWithPath: file))
        let run = try ToolTests.cask(["import-defaults", root.appending("store"), file, "--json"])
        XCTAssertEqual(run.status, 0, run.err)
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any], run.out)
        XCTAssertEqual(report["imported"] as? Int, Self.defaults.count)
        let stored = try XCTUnwrap(report["propertyListValues"] as? [[String: String]], run.out)
        XCTAssertEqual(stored, Self.mixed.map { ["name": $0.name, "reason": $0.reason] })
        XCTAssertEqual((report["skipped"] as? [Any])?.count, 0)
    }

    // MARK: PropertyListValue.typedValue()

    func testTypedValueIsTheSwiftValueOfOneShape() throws {
        func typed(_ value: PropertyListValue) throws -> Any { try value.typedValue() }
        XCTAssertEqual(try typed(.bool(true)) as? Bool, true)
        XCTAssertEqual(try typed(.integer(-3)) as? Int, -3)
        XCTAssertEqual(try typed(.real(0.5)) as? Double, 0.5)
        XCTAssertEqual(try typed(.array([.string("a")])) as? [String], ["a"])
        XCTAssertEqual(try typed(.array([])) as? [String], [])
        XCTAssertEqual(try typed(.dictionary(["a": .array([]), "b": .array([.date(Self.date)])])) as? [String: [Date]], ["a": [], "b": [Self.date]])
        XCTAssertEqual(try typed(.array([.dictionary([:]), .dictionary(["k": .data(Data([1]))])])) as? [[String: Data]], [[:], ["k": Data([1])]])
        // 127 nested arrays, the deepest the reader returns.
        var deep = PropertyListValue.bool(true)
        for _ in 0..<PropertyListReader.maxNesting { deep = .array([deep]) }
        XCTAssertNoThrow(try ObjectCoder.binary.encode(try deep.typedValue()))
        // The value itself where it has no Swift type, as PropertyListReader's example stores it.
        for (value, natural) in [(PropertyListValue.array([.string("a")]), try ObjectCoder.binary.encode(["a"])),
                                 (.array([.string("a"), .bool(true)]), try ObjectCoder.binary.encode(PropertyListValue.array([.string("a"), .bool(true)])))] {
            let stored = (try? value.typedValue()) ?? value
            XCTAssertEqual(try ObjectCoder.binary.encode(stored), natural)
        }

        XCTAssertThrowsError(try PropertyListValue.array([.integer(1), .real(1)]).typedValue()) { error in
            XCTAssertEqual(error as? PropertyListValue.ConversionError, .init(path: "", reason: "the array mixes integer and real values"))
        }
        XCTAssertThrowsError(try PropertyListValue.dictionary(["a": .array([.dictionary(["x": .bool(true), "y": .string("s")])])]).typedValue()) { error in
            XCTAssertEqual("\(error)", "the dictionary mixes boolean and string values at a[0]")
        }
        XCTAssertThrowsError(try PropertyListValue.array([.array([]), .dictionary([:])]).typedValue()) { error in
            XCTAssertEqual("\(error)", "the array mixes array and dictionary values")
        }
    }
}
