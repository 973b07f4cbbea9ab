import Foundation
import XCTest
@testable import Cask
import CaskTestSupport
import Synchronization

extension CaskStore.Keys {
    static let currentUser = CaskStore.Key<Profile?>("current-user")
    static let launchCount = CaskStore.Key<Int>("launch-count", default: 0)
    static let theme = CaskStore.Key<Color>("theme", default: .blue, coder: .json)
    static let recent = Key<[String]>("recent", default: [])  // unqualified works inside the extension
}

/// The object API of the store: set/get with each coder, errors naming key and path, typed keys,
/// prefix scans and the decoded-object cache.
final class ObjectsStoreTests: XCTestCase {
    private func open(_ dir: TemporaryDirectory, coder: ObjectCoder = .binary, cache: CaskStore.ObjectCacheLimit? = nil) throws -> CaskStore {
        var options = CaskStore.Options()
        options.objects = CaskStore.ObjectOptions(coder: coder, cache: cache)
        return try CaskStore.open(at: dir.path, options: options)
    }

    func testSetAndGetWithEveryCoder() throws {
        let dir = TemporaryDirectory("cask-objects")
        let store = try open(dir)
        // Everything through the binary coder; what JSON and property lists can encode through all three.
        try store.set(Everything(), forKey: "everything")
        let shapes: [Shape] = [.circle(radius: 1), .point, .labeled(name: "l", inner: Nested(title: "t", count: 2))]
        for coder in [ObjectCoder.binary, .json, .propertyList] {
            try store.set(Profile.sample(1), forKey: "profile/\(coder)", coder: coder)
            try store.set(shapes, forKey: "shapes/\(coder)", coder: coder)
            try store.set([3: "three", -1: "minus one"], forKey: "dict/\(coder)", coder: coder)
            if coder != .propertyList { try store.set(42, forKey: "int/\(coder)", coder: coder) }
        }
        // A property list cannot hold a bare number at the top level: Foundation's refusal, passed on.
        XCTAssertThrowsError(try store.set(42, forKey: "int/property list", coder: .propertyList)) { error in
            guard case .objectEncodingFailed(_, "Int", "", let reason) = error as? CaskError else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("Top-level Int encoded as number property list fragment"), reason)
        }
        try store.close()
        let reopened = try open(dir)
        XCTAssertEqual(try reopened.get(Everything.self, forKey: "everything"), Everything())
        for coder in [ObjectCoder.binary, .json, .propertyList] {
            XCTAssertEqual(try reopened.get(Profile.self, forKey: "profile/\(coder)", coder: coder), Profile.sample(1), "\(coder)")
            XCTAssertEqual(try reopened.get([Shape].self, forKey: "shapes/\(coder)", coder: coder), shapes, "\(coder)")
            XCTAssertEqual(try reopened.get([Int: String].self, forKey: "dict/\(coder)", coder: coder), [3: "three", -1: "minus one"])
            if coder != .propertyList { XCTAssertEqual(try reopened.get(Int.self, forKey: "int/\(coder)", coder: coder), 42) }
        }
        XCTAssertNil(try reopened.get(Profile.self, forKey: "absent"))
        // Each coder wrote what it says it writes.
        XCTAssertEqual(try reopened.get("int/binary"), [0x01, 0x1C, 0x0E, 0x00])
        XCTAssertEqual(try reopened.get("int/JSON"), Array("42".utf8))
        XCTAssertEqual(try reopened.get("profile/property list")?.prefix(6), ArraySlice("bplist".utf8))
        XCTAssertLessThan(try reopened.get("profile/binary")!.count, try reopened.get("profile/JSON")!.count)
        try reopened.close()
    }

    /// A get decodes the value where it was read — a buffer on the stack for small values, the
    /// segment's mapping for large ones, a scratch buffer for large compressed ones, a copy out of
    /// the write buffer in `.buffered` mode — through every read of the object API.
    func testObjectsDecodeWhereverTheirBytesAreRead() throws {
        struct Blob: Codable, Equatable, Sendable { var name: String; var bytes: Data }
        var random = SeededGenerator(seed: 16)
        let small = Profile.sample(5)
        let compressible = Everything()  // 20,000 repeated characters: stored compressed
        let incompressible = Blob(name: "noise", bytes: Data(random.bytes(8_000)))
        for durability in Durability.allCases {
            for cache in [nil, CaskStore.ObjectCacheLimit(maxEntries: 16)] as [CaskStore.ObjectCacheLimit?] {
                let dir = TemporaryDirectory("cask-objects-reads")
                defer { dir.remove() }
                var options = CaskStore.Options(durability: durability)
                options.objects = CaskStore.ObjectOptions(cache: cache)
                for reopen in [false, true] {
                    let store = try CaskStore.open(at: dir.path, options: options)
                    if !reopen {
                        try store.set(small, forKey: "a/small")
                        try store.set(compressible, forKey: "b/compressible")
                        try store.set(incompressible, forKey: "c/incompressible")
                    }
                    let what = "\(durability), cache \(cache != nil), reopened \(reopen)"
                    XCTAssertGreaterThan(try store.get("c/incompressible")!.count, 8_000, what)
                    for _ in 0..<2 {  // the second time from the cache, if there is one
                        XCTAssertEqual(try store.get(Profile.self, forKey: "a/small"), small, what)
                        XCTAssertEqual(try store.get(Everything.self, forKey: "b/compressible"), compressible, what)
                        XCTAssertEqual(try store.get(Blob.self, forKey: "c/incompressible"), incompressible, what)
                        XCTAssertEqual(try store.get(uncached: Blob.self, forKey: "c/incompressible"), incompressible, what)
                        XCTAssertEqual(try store.get(uncached: Everything.self, forKey: "b/compressible"), compressible, what)
                        XCTAssertEqual(try store.values(of: Blob.self, prefix: "c/").map(\.value), [incompressible], what)
                        XCTAssertEqual(try store.values(uncached: Profile.self, prefix: "a/").map(\.value), [small], what)
                        XCTAssertNil(try store.get(uncached: Profile.self, forKey: "absent"), what)
                    }
                    // A record that does not decode as the type asked for names the key, whatever the read.
                    XCTAssertThrowsError(try store.get(uncached: Profile.self, forKey: "c/incompressible"), what) { error in
                        guard case .objectDecodingFailed(let key, _, _, _) = error as? CaskError else { return XCTFail("\(error)") }
                        XCTAssertEqual(key, "c/incompressible")
                    }
                    try store.close()
                }
            }
        }
    }

    func testStoreWideCoderOption() throws {
        let dir = TemporaryDirectory("cask-objects-json")
        let store = try open(dir, coder: .json)
        try store.set(Nested(title: "t", count: 1), forKey: "n")
        XCTAssertEqual(try store.get("n")?.first, UInt8(ascii: "{"))
        XCTAssertEqual(try JSONDecoder().decode(Nested.self, from: Data(try store.get("n")!)), Nested(title: "t", count: 1))
        XCTAssertEqual(try store.get(Nested.self, forKey: "n"), Nested(title: "t", count: 1))
        try store.close()
    }

    func testErrorsNameKeyTypeAndPath() throws {
        let dir = TemporaryDirectory("cask-objects-errors")
        let store = try open(dir)
        try store.set(["items": [Pair(first: 1, second: "x")]], forKey: "doc")
        XCTAssertThrowsError(try store.get([String: [Nested]].self, forKey: "doc")) { error in
            XCTAssertEqual(error as? CaskError, .objectDecodingFailed(
                key: "doc", type: "Dictionary<String, Array<Nested>>", codingPath: "items[0].title", reason: "the required field \"title\" is missing"))
            XCTAssertEqual("\(error)", "value of key \"doc\" does not decode as Dictionary<String, Array<Nested>> at items[0].title: the required field \"title\" is missing; read it with the type and coder that wrote it, or overwrite it")
        }
        // Read with the wrong coder.
        XCTAssertThrowsError(try store.get(Pair.self, forKey: "doc", coder: .json)) { error in
            guard case .objectDecodingFailed(let key, let type, let path, _) = error as? CaskError else { return XCTFail("\(error)") }
            XCTAssertEqual([key, type, path], ["doc", "Pair", ""])
        }
        try store.put("json", Array(#"{"first":1}"#.utf8))
        XCTAssertThrowsError(try store.get(Pair.self, forKey: "json")) { error in
            XCTAssertEqual("\(error)", "value of key \"json\" does not decode as Pair: the first byte is 0x7b, not the version 1 of Cask's binary coding (is it JSON or a property list?); read it with the type and coder that wrote it, or overwrite it")
        }
        // A value that refuses to encode: nothing is written.
        let before = store.count
        XCTAssertThrowsError(try store.set(Refusing(), forKey: "refused")) { error in
            XCTAssertEqual(error as? CaskError, .objectEncodingFailed(key: "refused", type: "Refusing", codingPath: "inner", reason: "not today"))
            XCTAssertEqual("\(error)", "cannot encode Refusing for key \"refused\" at inner: not today; nothing was written")
        }
        XCTAssertThrowsError(try store.set(Refusing(), forKey: "refused", coder: .json)) { error in
            XCTAssertEqual(error as? CaskError, .objectEncodingFailed(key: "refused", type: "Refusing", codingPath: "inner", reason: "not today"))
        }
        XCTAssertEqual(store.count, before)
        XCTAssertNil(try store.get("refused"))
        // The store's own refusals pass through unchanged.
        XCTAssertThrowsError(try store.set(1, forKey: "")) { XCTAssertEqual($0 as? CaskError, .emptyKey) }
        try store.close()
        XCTAssertThrowsError(try store.get(Pair.self, forKey: "doc")) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
        XCTAssertThrowsError(try store.set(1, forKey: "x")) { XCTAssertEqual($0 as? CaskError, .closed(path: store.directory)) }
    }

    /// With the object cache and without: a cache miss once read as nil for every Optional type (issue 23, item 1).
    func testTypedKeys() throws {
        for cache in [nil, .entries(100)] as [CaskStore.ObjectCacheLimit?] {
            let dir = TemporaryDirectory("cask-objects-keys")
            defer { dir.remove() }
            let store = try open(dir, cache: cache)
            XCTAssertNil(store[.currentUser])
            XCTAssertEqual(store[.launchCount], 0)
            XCTAssertEqual(store[.theme], .blue)
            XCTAssertEqual(store[.recent], [])

            try store.set(Profile.sample(5), for: .currentUser)
            try store.set(store[.launchCount] + 1, for: .launchCount)
            try store.set(store[.launchCount] + 1, for: .launchCount)
            try store.set(.red, for: .theme)
            try store.set(["a", "b"], for: .recent)
            XCTAssertEqual(store[.currentUser], Profile.sample(5))
            XCTAssertEqual(try store.value(for: .currentUser), Profile.sample(5))
            XCTAssertEqual(try store.get(Profile?.self, forKey: "current-user"), Profile.sample(5))
            XCTAssertEqual(store[.launchCount], 2)
            XCTAssertEqual(store[.theme], .red)
            XCTAssertEqual(try store.get("theme"), Array(#""red""#.utf8))  // the key's own coder
            XCTAssertEqual(try store.value(for: .recent), ["a", "b"])
            // An optional key stores its value as the plain value; nil deletes it.
            XCTAssertEqual(try store.get(Profile.self, forKey: "current-user"), Profile.sample(5))
            try store.set(nil, for: .currentUser)
            XCTAssertFalse(try store.contains("current-user"))
            XCTAssertNil(store[.currentUser])
            XCTAssertTrue(try store.removeValue(for: .launchCount))
            XCTAssertEqual(store[.launchCount], 0)

            // A record that does not decode: the subscript reads the default, value(for:) throws.
            try store.put("launch-count", Array("not a number".utf8))
            XCTAssertEqual(store[.launchCount], 0)
            XCTAssertThrowsError(try store.value(for: .launchCount)) { error in
                guard case .objectDecodingFailed(let key, let type, _, _) = error as? CaskError else { return XCTFail("\(error)") }
                XCTAssertEqual([key, type], ["launch-count", "Int"])
            }
            try store.close()
            let reopened = try open(dir, cache: cache)
            XCTAssertEqual(reopened[.theme], .red)
            XCTAssertEqual(reopened[.recent], ["a", "b"])
            try reopened.close()
        }
    }

    /// One rule for nil (issue 23, item 7): `set(nil)` deletes, by typed key, by name or in a batch
    /// (by name it wrote a null record that `contains` and `count` counted).
    func testNilDeletesEverywhere() throws {
        let dir = TemporaryDirectory("cask-objects-nil")
        defer { dir.remove() }
        let store = try open(dir)
        try store.set(Profile.sample(1), forKey: "user")
        try store.set(Profile?.none, forKey: "user")
        XCTAssertFalse(try store.contains("user"))
        XCTAssertEqual(try store.count(in: .all), 0)
        XCTAssertNil(try store.get(Profile?.self, forKey: "user"))
        try store.set(Profile.sample(2), forKey: "user")
        var batch = WriteBatch()
        batch.set(Profile?.none, forKey: "user")
        try store.write(batch)
        XCTAssertFalse(try store.contains("user"))
        try store.close()
    }

    /// An unreadable value that the subscript reads as the default is reported, never silent
    /// (issue 23, item 6); an absent key is not.
    func testTheSubscriptReportsWhatItCouldNotRead() throws {
        let dir = TemporaryDirectory("cask-objects-unreadable")
        defer { dir.remove() }
        let reported = Mutex<[(String, CaskError)]>([])
        var options = CaskStore.Options()
        options.objects.onUnreadableValue = { key, error in reported.withLock { $0.append((key, error)) } }
        let store = try CaskStore.open(at: dir.path, options: options)
        XCTAssertEqual(store[.launchCount], 0)
        XCTAssertTrue(reported.withLock { $0.isEmpty }, "absent is not unreadable")
        try store.put("launch-count", Array("not a number".utf8))
        XCTAssertEqual(store[.launchCount], 0)
        try store.close()
        XCTAssertEqual(store[.launchCount], 0)
        let calls = reported.withLock { $0 }
        XCTAssertEqual(calls.map(\.0), ["launch-count", "launch-count"])
        guard case .objectDecodingFailed(let key, let type, _, _) = calls.first?.1 else { return XCTFail("\(calls)") }
        XCTAssertEqual([key, type], ["launch-count", "Int"])
        XCTAssertEqual(calls.last?.1, .closed(path: store.directory))
    }

    /// Typed keys can expire (issue 23, item 5): the key then reads as its default.
    func testTypedKeysExpire() async throws {
        let dir = TemporaryDirectory("cask-objects-keys-expire")
        defer { dir.remove() }
        let store = try open(dir)
        try store.set(Profile.sample(3), for: .currentUser, expiresAfter: .milliseconds(100))
        try store.set(7, for: .launchCount, expiresAfter: .seconds(3600))
        XCTAssertEqual(store[.currentUser], Profile.sample(3))
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertNil(store[.currentUser])
        XCTAssertFalse(try store.contains("current-user"))
        XCTAssertEqual(store[.launchCount], 7)
        try store.set(nil, for: .currentUser, expiresAfter: .seconds(1))  // nil deletes, as without an expiry
        XCTAssertNil(store[.currentUser])
        try store.close()
    }

    func testValuesUnderAPrefix() throws {
        let dir = TemporaryDirectory("cask-objects-prefix")
        let store = try open(dir, cache: .entries(100))
        var expected: [(String, Nested)] = []
        for user in ["ada", "adam", "bob"] {
            for timestamp in [1_700_000_300, 1_700_000_100, 1_700_000_200] {
                let key = "drafts/\(user)/\(timestamp)"
                let draft = Nested(title: "\(user) at \(timestamp)", count: timestamp)
                try store.set(draft, forKey: key)
                if user == "ada" { expected.append((key, draft)) }
            }
        }
        try store.set(1, forKey: "drafts-count")
        expected.sort { $0.0 < $1.0 }
        for _ in 0..<2 {  // the second time from the cache
            let drafts = try store.values(of: Nested.self, prefix: "drafts/ada/")
            XCTAssertEqual(drafts.map(\.key), expected.map(\.0))
            XCTAssertEqual(drafts.map(\.value), expected.map(\.1))
        }
        XCTAssertEqual(store.objectCacheStatistics?.hits, 3)
        XCTAssertEqual(try store.values(of: Nested.self, prefix: "drafts/").count, 9)
        XCTAssertEqual(try store.values(of: Nested.self, prefix: "nothing/").count, 0)
        try store.delete("drafts/ada/1700000200")
        XCTAssertEqual(try store.values(of: Nested.self, prefix: "drafts/ada/").map(\.value.count), [1_700_000_100, 1_700_000_300])
        // A prefix holding values of another type is an error naming the first key that does not decode.
        XCTAssertThrowsError(try store.values(of: Nested.self, prefix: "drafts")) { error in
            guard case .objectDecodingFailed(let key, _, _, _) = error as? CaskError else { return XCTFail("\(error)") }
            XCTAssertEqual(key, "drafts-count")
        }
        // Non-Sendable types take the uncached path, by name, and give the same answers.
        XCTAssertEqual(try store.values(uncached: Animal.self, prefix: "none/").count, 0)
        try store.close()
    }

    /// Generic code constrained to `Codable & Sendable` reads through the cache (issue 23, item 8:
    /// over `T: Codable` alone it silently did not; that overload is now deprecated, so the
    /// compiler says so); `get(uncached:)` is the spelling for types that are not `Sendable`.
    func testGenericCodeReadsThroughTheCache() throws {
        let dir = TemporaryDirectory("cask-objects-generic")
        let store = try open(dir, cache: .entries(10))
        func save<T: Codable & Sendable>(_ value: T, _ key: String) throws { try store.set(value, forKey: key) }
        func load<T: Codable & Sendable>(_ type: T.Type, _ key: String) throws -> T? { try store.get(T.self, forKey: key) }
        try save(Profile.sample(1), "p")
        for _ in 0..<3 { XCTAssertEqual(try load(Profile.self, "p"), Profile.sample(1)) }
        XCTAssertEqual(store.objectCacheStatistics?.hits, 2)
        XCTAssertEqual(store.objectCacheStatistics?.misses, 1)
        XCTAssertEqual(try store.get(uncached: Profile.self, forKey: "p"), Profile.sample(1))
        XCTAssertEqual(try store.values(uncached: Profile.self, prefix: "p").map(\.value), [Profile.sample(1)])
        XCTAssertEqual(store.objectCacheStatistics?.hits, 2, "the uncached reads leave the cache alone")
        XCTAssertEqual(store.objectCacheStatistics?.misses, 1)
        try store.close()
    }

    func testCacheServesRepeatedReadsAndIsInvalidatedByEveryWrite() throws {
        let dir = TemporaryDirectory("cask-objects-cache")
        let store = try open(dir, cache: .entries(10))
        try store.set(Profile.sample(1), forKey: "p")
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(1))
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(1))
        XCTAssertEqual(store.objectCacheStatistics, ObjectCacheStatistics(hits: 1, misses: 1, entries: 1, bytes: try store.get("p")!.count))

        // Through the object API, through put, through delete: the next read sees the write.
        try store.set(Profile.sample(2), forKey: "p")
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(2))
        try store.put("p", try CaskBinaryEncoder().encode(Profile.sample(3)))
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(3))
        try store.delete("p")
        XCTAssertNil(try store.get(Profile.self, forKey: "p"))
        try store.set(Profile.sample(4), forKey: "p")
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(4))
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(4))
        // Another type or coder for the same key is a separate decode, not a wrong cast.
        XCTAssertThrowsError(try store.get(Nested.self, forKey: "p"))
        XCTAssertThrowsError(try store.get(Profile.self, forKey: "p", coder: .json))
        // Compaction moves the record: one more decode, same value.
        for i in 0..<50 { try store.set(i, forKey: "filler/\(i % 5)") }
        try store.compact()
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(4))
        XCTAssertEqual(try store.get(Profile.self, forKey: "p"), Profile.sample(4))
        let statistics = try XCTUnwrap(store.objectCacheStatistics)
        XCTAssertEqual(statistics.hits, 3)
        try store.close()
    }

    /// A cached value of a key that expires is not served past its expiry.
    func testCacheRespectsExpiry() throws {
        let dir = TemporaryDirectory("cask-objects-expiry")
        let store = try open(dir, cache: .entries(10))
        try store.put("session", try CaskBinaryEncoder().encode(Nested(title: "token", count: 1)), expiresAfter: .milliseconds(300))
        XCTAssertEqual(try store.get(Nested.self, forKey: "session")?.title, "token")
        XCTAssertEqual(try store.get(Nested.self, forKey: "session")?.title, "token")
        XCTAssertEqual(store.objectCacheStatistics?.hits, 1)
        Thread.sleep(forTimeInterval: 0.4)
        XCTAssertNil(try store.get(Nested.self, forKey: "session"))
        try store.close()
    }

    func testCacheBounds() throws {
        let dir = TemporaryDirectory("cask-objects-bounds")
        let byCount = try open(dir, cache: .entries(3))
        for i in 0..<5 { try byCount.set(Nested(title: "\(i)", count: i), forKey: "k\(i)") }
        for i in 0..<5 { _ = try byCount.get(Nested.self, forKey: "k\(i)") }
        XCTAssertEqual(byCount.objectCacheStatistics?.entries, 3)
        _ = try byCount.get(Nested.self, forKey: "k4")  // most recent: still there
        _ = try byCount.get(Nested.self, forKey: "k0")  // evicted first
        XCTAssertEqual(byCount.objectCacheStatistics?.hits, 1)
        try byCount.close()

        let size = try CaskBinaryEncoder().encode(Nested(title: "0", count: 0)).count
        let byBytes = try open(dir, cache: .bytes(size * 2))
        for i in 0..<5 { _ = try byBytes.get(Nested.self, forKey: "k\(i)") }
        XCTAssertEqual(byBytes.objectCacheStatistics?.entries, 2)
        XCTAssertEqual(byBytes.objectCacheStatistics?.bytes, size * 2)
        try byBytes.set(String(repeating: "big", count: 100), forKey: "big")
        _ = try byBytes.get(String.self, forKey: "big")  // larger than the whole cache: not cached
        XCTAssertEqual(byBytes.objectCacheStatistics?.entries, 2)
        try byBytes.close()
    }

    /// Readers never see a value older than the last write that returned before their read began.
    func testCacheUnderConcurrentWrites() throws {
        let dir = TemporaryDirectory("cask-objects-concurrent")
        let store = try open(dir, cache: .entries(8))
        try store.set(Nested(title: "v", count: 0), forKey: "counter")
        let acknowledged = Atomic(0)
        let failures = Atomic(0)
        let readerGets = Atomic(0)
        let rounds = 2_000
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker == 0 {
                // The readers go first, so that the cache is used whatever the scheduler does
                // (under the thread sanitizer the writer once finished before either had begun).
                while readerGets.load(ordering: .acquiring) < 200 { sched_yield() }
                for version in 1...rounds {
                    try! store.set(Nested(title: "v", count: version), forKey: "counter")
                    acknowledged.store(version, ordering: .releasing)
                }
            } else {
                while acknowledged.load(ordering: .acquiring) < rounds {
                    let floor = acknowledged.load(ordering: .acquiring)
                    let seen = try! store.get(Nested.self, forKey: "counter")!.count
                    if seen < floor { failures.add(1, ordering: .relaxed) }
                    readerGets.add(1, ordering: .releasing)
                }
            }
        }
        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
        XCTAssertEqual(try store.get(Nested.self, forKey: "counter")?.count, rounds)
        XCTAssertGreaterThan(store.objectCacheStatistics?.hits ?? 0, 0)
        try store.close()
    }
}

/// Its encode(to:) fails partway.
struct Refusing: Codable {
    struct Inner: Codable {
        func encode(to encoder: any Encoder) throws {
            throw EncodingError.invalidValue(0, EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "not today"))
        }
    }
    var before = 1
    var inner = Inner()
}
