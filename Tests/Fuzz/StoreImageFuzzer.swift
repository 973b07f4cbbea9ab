import Foundation
#if canImport(Glibc)
import Glibc
#endif

// libFuzzer target: an arbitrary directory image (segments, hint files, dictionaries, a compaction
// manifest, leftover temporaries, an ENCRYPTION file; see `StoreImage`) goes through everything that
// reads a store from disk: verification, a read-only open, a repairing open, a compaction and a reopen.
// An image with an ENCRYPTION file is an encrypted store, read with the fixed `fuzzKey` its seeds
// were written with (the fuzzing build's checksums and tags are zero and its cipher is the identity:
// a mutation reaches the parsers of what a tag covers, as in a plain image).
//
// Nothing may crash, hang or allocate without bound, and on every input: a compaction does not
// change what the store reads; what a store read before `close()` it reads again after a reopen;
// and an offline repair leaves a store that opens and verifies clean and reads what a writer read
// before. The last two hold where the hints the open trusted agree with their segments (with
// checksums off a hint parses where it does not; Tests/Fuzz/Findings). Keys whose newest record
// is damaged may change, see `matches`. Built and run by Tools/fuzz.sh.

private let directory: String = {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    return base + "/cask-fuzz-store-image-\(getpid())"
}()

private let probeKey = Array("fuzz/probe".utf8)
private let probeValue = [UInt8](repeating: 0x5A, count: 300)

/// The key of every encrypted image (its seeds are written with it).
private let fuzzKey = try! EncryptionKey((0..<32).map { UInt8(truncatingIfNeeded: 0xC5 &+ $0 &* 11) })

/// How the images' stores are opened: with the fixed key when the image has an ENCRYPTION file.
private func storeEncryption(of files: [String: [UInt8]]) -> Encryption {
    files[EncryptionFile.fileName] != nil ? .key(fuzzKey) : .none
}

enum StoreImageFuzzer {
    static func run(_ image: UnsafeRawBufferPointer) {
        runStoreImage(image)
    }

    /// The seed corpus: images of stores written by this build (whose checksums are all zero),
    /// covering every record shape.
    static func writeSeeds(to seeds: String) throws {
        for (name, write) in seedStores {
            let store = directory + "-seed"
            try? FileManager.default.removeItem(atPath: store)
            try write(store)
            let image = try StoreImage.image(ofDirectory: store)
            try Data(image).write(to: URL(fileURLWithPath: seeds + "/" + name))
            try? FileManager.default.removeItem(atPath: store)
        }
    }
}

private func runStoreImage(_ image: UnsafeRawBufferPointer) {
    let files = StoreImage.files(in: image)
    StoreImage.materialize(files, in: directory)
    let encryption = storeEncryption(of: files)
    let verification = Result { () throws(CaskError) in try CaskStore.verify(at: directory, encryption: encryption) }
    trace("verify: \(verification)")

    var readOnly = CaskStore.Options(durability: .buffered, readOnly: true)
    readOnly.encryption = encryption
    readOnly.createIfMissing = false
    if let store = try? CaskStore.open(at: directory, options: readOnly) {
        _ = contents(of: store)
        try? store.close()
    }

    var writable = CaskStore.Options(durability: .buffered)
    writable.encryption = encryption
    writable.createIfMissing = false
    writable.automaticCompaction = false
    writable.maxSegmentSize = 16 << 10
    guard let store = try? CaskStore.open(at: directory, options: writable) else { return }
    trace("first open: \(store.recoveryReport)")
    var expected = contents(of: store)
    // Hint files the open trusted (it rejects only a hint that does not parse) that verification
    // found disagreeing with their segments: possible here because checksums are off.
    let trustedDisagreeingHints = Set((try? verification.get().invalidHints.map(\.file)) ?? [])
        .subtracting(store.recoveryReport.invalidHints.map(\.file))
    if (try? store.put(probeKey, probeValue)) != nil { expected[probeKey] = .some(probeValue) }
    let compaction = Result { () throws(CaskError) in try store.compact() }
    trace("compaction: \(compaction)")
    trace("files after compaction: " + ((try? FileManager.default.contentsOfDirectory(atPath: directory).sorted()) ?? []).joined(separator: " "))
    if case .success = compaction {
        let compacted = contents(of: store)
        if !matches(compacted, expected) { fail("a compaction changed the contents", expected: expected, found: compacted) }
        expected = compacted
    } else {
        expected = contents(of: store)
    }
    guard (try? store.close()) != nil else { return }

    guard let reopened = try? CaskStore.open(at: directory, options: writable) else {
        fatalError("a store that closed cleanly does not reopen")
    }
    trace("reopen: \(reopened.recoveryReport)")
    let found = contents(of: reopened)
    // The comparison holds for stores whose index matched their records. An open trusts a hint
    // file whose checksum holds and does not read the records behind it (that is what makes it
    // fast); with checksums off a hint can disagree with its segment (name another key, length or
    // expiry), and a compaction, which copies records, or a reopen that rewrote the hint, then
    // shows the segment's version (Tests/Fuzz/Findings). Verification names every such hint.
    if trustedDisagreeingHints.isEmpty, !matches(found, expected) {
        fail("a reopen changed the contents", expected: expected, found: found)
    }
    try? reopened.close()

    checkRepair(of: image, hintsAgree: trustedDisagreeingHints.isEmpty, encryption: encryption)
}

/// The offline repair of the original image: afterwards the store verifies clean and, when the hints
/// the open trusted agree with their segments, reads what a writer read before the repair.
private func checkRepair(of image: UnsafeRawBufferPointer, hintsAgree: Bool, encryption: Encryption) {
    StoreImage.materialize(StoreImage.files(in: image), in: directory)
    var writable = CaskStore.Options(durability: .buffered)
    writable.encryption = encryption
    writable.createIfMissing = false
    writable.automaticCompaction = false
    guard let store = try? CaskStore.open(at: directory, options: writable) else { return }
    let expected = contents(of: store)
    guard (try? store.close()) != nil else { return }

    let backup = directory + "-backup"
    try? FileManager.default.removeItem(atPath: backup)
    defer { try? FileManager.default.removeItem(atPath: backup) }
    let repair = Result { () throws(CaskError) in try CaskStore.repair(at: directory, backupDirectory: backup, encryption: encryption) }
    trace("repair: \(repair)")
    guard case .success = repair else { return }
    guard let verification = try? CaskStore.verify(at: directory, encryption: encryption) else { fatalError("a repaired store does not verify") }
    if !verification.isClean { fatalError("a repaired store still has damage: \(verification)") }
    guard let repaired = try? CaskStore.open(at: directory, options: writable) else {
        fatalError("a repaired store does not open")
    }
    // The repair rebuilds hints from the segments' records; where a trusted hint disagreed with
    // them, the writer had read the hint's version (Tests/Fuzz/Findings/repair-drops-batch-member).
    // CASK_FUZZ_STRICT_REPAIR=1 compares in that case too.
    if hintsAgree || ProcessInfo.processInfo.environment["CASK_FUZZ_STRICT_REPAIR"] != nil {
        let found = contents(of: repaired)
        if !matches(found, expected) { fail("a repair changed the contents", expected: expected, found: found) }
    }
    try? repaired.close()
}

private let verbose = ProcessInfo.processInfo.environment["CASK_FUZZ_VERBOSE"] != nil

/// With `CASK_FUZZ_VERBOSE` set (to replay one input), what each step saw goes to standard error.
private func trace(_ line: @autoclosure () -> String) {
    if verbose { FileHandle.standardError.write(Data((line() + "\n").utf8)) }
}

/// What a store reads: every key it lists, with its value, or nil where the read fails (the
/// record is damaged).
private func contents(of store: CaskStore) -> [[UInt8]: [UInt8]?] {
    var contents: [[UInt8]: [UInt8]?] = [:]
    for key in (try? store.keys()) ?? [] {
        contents[key] = .some(try? store.get(key))
    }
    return contents
}

/// Whether `found` reads as `expected` did. A key whose read failed before (its newest record is
/// damaged) may read afterwards as absent or as an older version: a damaged record is skipped
/// once a compaction or a scan meets it, as FORMAT.md's damage rule says.
private func matches(_ found: [[UInt8]: [UInt8]?], _ expected: [[UInt8]: [UInt8]?]) -> Bool {
    for (key, value) in expected {
        guard let value else { continue }
        guard case .some(.some(let other)) = found[key], other == value else { return false }
    }
    return found.keys.allSatisfy { expected[$0] != nil }
}

private func fail(_ what: String, expected: [[UInt8]: [UInt8]?], found: [[UInt8]: [UInt8]?]) -> Never {
    func hex(_ bytes: [UInt8]?) -> String {
        guard let bytes else { return "unreadable" }
        return "\(bytes.count) bytes [" + bytes.prefix(24).map { String($0, radix: 16) }.joined(separator: " ") + "]"
    }
    var message = what
    for key in Set(expected.keys).union(found.keys).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
        let before = expected[key], after = found[key]
        if before == after { continue }
        message += "\n  [\(hex(key))]: " + (before.map { hex($0) } ?? "absent") + " -> " + (after.map { hex($0) } ?? "absent")
    }
    if verbose {
        message += "\n  files now: " + ((try? FileManager.default.contentsOfDirectory(atPath: directory).sorted()) ?? []).joined(separator: " ")
    }
    fatalError(message)
}

// MARK: Seed corpus

private let seedStores: [(String, (String) throws -> Void)] = [
    ("empty", { directory in try CaskStore.open(at: directory).close() }),
    ("puts-deletes", { directory in
        let store = try CaskStore.open(at: directory)
        for index in 0..<40 {
            let value = index % 2 == 0
                ? [UInt8](repeating: UInt8(index), count: 120)  // compressible: stored as LZ4
                : (0..<24).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ index) }
            try store.put(Array("user/\(index)".utf8), value)
        }
        for index in stride(from: 0, to: 40, by: 7) { _ = try store.delete(Array("user/\(index)".utf8)) }
        try store.put("user/3", Array("overwritten".utf8))
        try store.close()
    }),
    ("segments-hints-expiry", { directory in
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 4096
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory, options: options)
        for index in 0..<60 {
            try store.put(Array("session/\(index % 25)".utf8), (0..<150).map { UInt8(truncatingIfNeeded: $0 &* index) })
        }
        try store.put(Array("expired".utf8), Array("gone".utf8), expiresAtMilliseconds: 1)
        try store.put(Array("expires-later".utf8), Array("kept".utf8), expiresAtMilliseconds: 1 << 50)
        _ = try store.delete("session/4")
        try store.close()
    }),
    ("key-prefixes", { directory in
        // Segments of 4 KiB: once 8 keys are sampled (one put in 16), each new one names the prefix
        // the drafts share (format 4), its records eliding it, but for the keys that do not share it;
        // a delete and a batch among them; a compaction rewrites the first segment's records with it.
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 4096
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory, options: options)
        for index in 0..<400 { try store.put(Array("drafts/000007/\(1_000 + index)".utf8), Array("d\(index)".utf8)) }
        try store.put("settings/theme", Array("dark".utf8))
        _ = try store.delete("drafts/000007/1003")
        var batch = WriteBatch()
        batch.put("drafts/000007/9000", Array("batched".utf8))
        batch.delete("drafts/000007/1004")
        try store.write(batch)
        try store.compact()
        try store.close()
    }),
    ("batches", { directory in
        let store = try CaskStore.open(at: directory)
        var batch = WriteBatch()
        for index in 0..<5 { batch.put(Array("draft/\(index)".utf8), Array("text \(index)".utf8)) }
        batch.delete("draft/2")
        batch.put(Array("draft/timed".utf8), Array("soon".utf8), expiresAtMilliseconds: 1 << 50)
        try store.write(batch)
        try store.put("after-batch", Array("plain".utf8))
        try store.close()
    }),
    ("dictionary", { directory in
        // A dictionary trained from the first 32 KiB of values, segments of both versions, a
        // compaction (every file small enough for an image: at most 8 segments of under 64 KiB).
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 60 << 10
        options.automaticCompaction = false
        options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 32 << 10)
        let store = try CaskStore.open(at: directory, options: options)
        func profile(_ n: Int) -> [UInt8] {
            Array(#"{"id":\#(n * 7919 % 10007),"name":"user \#(n % 13)","email":"u\#(n)@example.com","tags":["swift","cask"],"city":"Kyoto"}"#.utf8)
        }
        var n = 0, sampled = 0
        while sampled < 32 << 10 {  // the put that fills the sample starts the training
            let value = profile(n)
            try store.put(Array("user/\(n % 90)".utf8), value)
            sampled += value.count
            n += 1
        }
        let deadline = Date().addingTimeInterval(120)
        while store.dictionaryForNewSegments == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        precondition(store.dictionaryForNewSegments != nil, "the dictionary seed's store trained no dictionary")
        for m in 0..<40 { try store.put(Array("user/\(m)".utf8), profile(n + m)) }
        _ = try store.compact()
        try store.put("after", profile(1))
        try store.close()
    }),
    ("encrypted", { directory in
        // ChaCha20-Poly1305 under fuzzKey: segments of 4 KiB with their version 4 hints, records of
        // every shape (raw and LZ4, a batch with a delete, expiries, deletes). (The target compacts
        // every image; the encrypted dictionary seed holds a compaction's outputs.)
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 4096
        options.automaticCompaction = false
        options.encryption = .key(fuzzKey, algorithm: .xchacha20poly1305)
        let store = try CaskStore.open(at: directory, options: options)
        for index in 0..<36 {
            let value = index % 2 == 0
                ? [UInt8](repeating: UInt8(index), count: 150)
                : (0..<150).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            try store.put(Array("session/\(index % 14)".utf8), value)
        }
        var batch = WriteBatch()
        for index in 0..<3 { batch.put(Array("draft/\(index)".utf8), Array("text \(index)".utf8)) }
        batch.delete("session/3")
        try store.write(batch)
        try store.put(Array("expired".utf8), Array("gone".utf8), expiresAtMilliseconds: 1)
        try store.put(Array("expires-later".utf8), Array("kept".utf8), expiresAtMilliseconds: 1 << 50)
        _ = try store.delete("session/5")
        try store.put("last", Array("plain".utf8))
        try store.close()
    }),
    ("encrypted-aes", { directory in
        // AES-256-GCM (the seeds are written on a CPU with AES-NI; an image of it opens where
        // libsodium runs AES-256-GCM): two segments with hints, a delete.
        precondition(EncryptionAlgorithm.aes256gcm.isAvailable, "writing the encrypted-aes seed needs AES-NI")
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 4096
        options.automaticCompaction = false
        options.encryption = .key(fuzzKey, algorithm: .aes256gcm)
        let store = try CaskStore.open(at: directory, options: options)
        for index in 0..<30 { try store.put(Array("k\(index % 12)".utf8), (0..<140).map { UInt8(truncatingIfNeeded: $0 &+ index) }) }
        _ = try store.delete("k7")
        try store.close()
    }),
    ("encrypted-dictionary", { directory in
        // The dictionary seed's store, encrypted: a version 2 dictionary file that version 3
        // segments name by id and salt, records compressed against it and sealed, a compaction.
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 60 << 10
        options.automaticCompaction = false
        options.dictionaries = DictionaryOptions(enabled: true, trainingSampleBytes: 32 << 10)
        options.encryption = .key(fuzzKey, algorithm: .xchacha20poly1305)
        let store = try CaskStore.open(at: directory, options: options)
        func profile(_ n: Int) -> [UInt8] {
            Array(#"{"id":\#(n * 7919 % 10007),"name":"user \#(n % 13)","email":"u\#(n)@example.com","tags":["swift","cask"],"city":"Kyoto"}"#.utf8)
        }
        var n = 0, sampled = 0
        while sampled < 32 << 10 {
            let value = profile(n)
            try store.put(Array("user/\(n % 90)".utf8), value)
            sampled += value.count
            n += 1
        }
        let deadline = Date().addingTimeInterval(120)
        while store.dictionaryForNewSegments == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        precondition(store.dictionaryForNewSegments != nil, "the encrypted dictionary seed's store trained no dictionary")
        for m in 0..<40 { try store.put(Array("user/\(m)".utf8), profile(n + m)) }
        _ = try store.compact()
        try store.put("after", profile(1))
        try store.close()
    }),
    ("compacted", { directory in
        var options = CaskStore.Options(durability: .buffered)
        options.maxSegmentSize = 4096
        options.automaticCompaction = false
        let store = try CaskStore.open(at: directory, options: options)
        for round in 0..<4 {
            for index in 0..<8 {
                try store.put(Array("k\(index)".utf8), (0..<400).map { UInt8(truncatingIfNeeded: $0 &* (round + 1)) })
            }
        }
        _ = try store.delete("k1")
        _ = try store.compact()
        try store.put("k9", Array("after compaction".utf8))
        try store.close()
    }),
]
