import Cask
import XCTest

/// Fails the test (at `file`, `line`, with `context`) unless `store` holds exactly `model`:
///
/// - `count` is the model's;
/// - `keys()` lists the model's keys, each once, in ascending byte order (a missing, an extra, a
///   repeated or a misplaced key is a failure);
/// - every key of the model: `get` returns its value and `contains` is true;
/// - keys the model does not hold ("user/absent", "zzz"): `get` returns nil, `contains` is false.
///
/// A call that throws is a failure, not an exit: the checks go on, and the test goes on.
/// One checker for every "store equals its model" test (model, torn-write, compaction,
/// fault-injection, reserved-space, corruption and recovery tests), so they all check the same.
package func assertStore(
    _ store: CaskStore, matches model: [[UInt8]: [UInt8]], _ context: String,
    file: StaticString = #filePath, line: UInt = #line
) {
    func name(_ key: [UInt8]) -> String { String(decoding: key.prefix(40), as: UTF8.self) }
    func names(_ keys: some Sequence<[UInt8]>) -> String { "[" + keys.prefix(10).map(name).joined(separator: ", ") + "]" }

    XCTAssertEqual(store.count, model.count, "\(context): count", file: file, line: line)

    let expectedKeys = model.keys.sorted { $0.lexicographicallyPrecedes($1) }
    do {
        let keys = try store.keys()
        if keys != expectedKeys {
            let listed = Set(keys)
            let extra = keys.filter { model[$0] == nil }
            let missing = expectedKeys.filter { !listed.contains($0) }
            XCTFail(
                "\(context): keys() lists \(keys.count) keys, expected \(expectedKeys.count)"
                    + (extra.isEmpty ? "" : "; \(extra.count) not in the model: \(names(extra))")
                    + (missing.isEmpty ? "" : "; \(missing.count) missing: \(names(missing))")
                    + (extra.isEmpty && missing.isEmpty ? "; the same keys, out of order or listed twice" : ""),
                file: file, line: line)
        }
    } catch {
        XCTFail("\(context): keys() threw \(error)", file: file, line: line)
    }

    var wrong: [String] = []
    for key in expectedKeys {
        let value = model[key]!
        do {
            let stored = try store.get(key)
            if stored != value { wrong.append("\(name(key)): \(stored.map { "\($0.count) bytes" } ?? "absent"), expected \(value.count) bytes") }
        } catch {
            wrong.append("\(name(key)): get threw \(error)")
        }
        do {
            if try !store.contains(key) { wrong.append("\(name(key)): contains is false") }
        } catch {
            wrong.append("\(name(key)): contains threw \(error)")
        }
    }
    for absent in [Array("user/absent".utf8), Array("zzz".utf8)] where model[absent] == nil {
        do {
            if let stored = try store.get(absent) { wrong.append("\(name(absent)) (not in the model): get returned \(stored.count) bytes") }
            if try store.contains(absent) { wrong.append("\(name(absent)) (not in the model): contains is true") }
        } catch {
            wrong.append("\(name(absent)) (not in the model): \(error)")
        }
    }
    if !wrong.isEmpty {
        XCTFail("\(context): \(wrong.count) wrong: \(wrong.prefix(10).joined(separator: "; "))", file: file, line: line)
    }
}

/// ``assertStore(_:matches:_:file:line:)`` for a model keyed by strings (their UTF-8 bytes).
package func assertStore(
    _ store: CaskStore, matches model: [String: [UInt8]], _ context: String,
    file: StaticString = #filePath, line: UInt = #line
) {
    let bytes = Dictionary(uniqueKeysWithValues: model.map { (Array($0.key.utf8), $0.value) })
    assertStore(store, matches: bytes, context, file: file, line: line)
}
