import Cask
import Foundation

/// `cask dump <dir> [--prefix <prefix>] [--escaped] [--segment <id>] [--json] [--key-file <file>]`
struct DumpCommand: Subcommand {
    static let help = CommandHelp(
        name: "dump",
        abstract: "List every record of every segment, in file order.",
        discussion: [
            "Reads the segment files as they are, without the index: overwritten and deleted records, batch members and batch commits included. Prints a line for each segment (id, file, size, base sequence number), then one line per record: segment:offset, type (put, delete, batch-commit), seq, bytes (the whole record on disk), stored (the payload on disk), value (its length uncompressed), flags (lz4, expires, batch: a member of an atomic batch), the expiry time, and last the key, escaped as 'cask list' prints keys. A batch commit shows the seqs of the members it commits instead of a key. A damaged byte range is printed as a 'damaged' line with its offset, length, kind (record, segment-header, torn-tail, uncommitted-batch) and reason.",
            "With --json, prints JSON Lines instead: one object per segment, record and damaged range, told apart by \"kind\"; keys that are valid UTF-8 are strings under \"key\", other keys base64 under \"keyBase64\".",
            "Checks each record's lengths and checksum, as opening the store does ('cask verify' also decompresses values and checks hint files), and exits 0 whatever damage it shows. Changes nothing and takes no lock, so it works while another process writes (an append in progress at the end of the active segment then shows as a torn tail).",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [
            .init(name: "prefix", valueName: "prefix", help: "Only records of keys that start with these bytes (segments and damage are still shown; batch commits are not)."),
            KeyEscaping.escapedFlag,
            .init(name: "segment", valueName: "id", help: "Only the segment with this id (1 for 0000000001.cask)."),
            .init(name: "json", valueName: nil, help: "Print JSON Lines instead of text: one object per line, object keys sorted."),
            KeyFile.option,
        ])

    let directory: String
    let prefix: [UInt8]?
    let segment: UInt64?
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        prefix = try arguments.option("prefix").map { (value) throws(ToolError) in try arguments.key(value, label: "--prefix") }
        segment = try arguments.option("segment").map { (text) throws(ToolError) in
            guard let id = UInt64(String(decoding: text, as: UTF8.self)), (1...UInt64(UInt32.max - 1)).contains(id) else {
                throw .usage("--segment must be a segment id from 1 to \(UInt32.max - 1), not '\(KeyEscaping.escape(text))'")
            }
            return id
        }
        json = arguments.flag("json")
        encryption = try KeyFile.encryption(arguments)
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let encoder = JSONLines.encoder()
        var failure: ToolError?
        var segments = 0, records = 0, damaged = 0
        try CaskError.wrap { () throws(CaskError) in
            try CaskStore.inspect(at: directory, segment: segment, encryption: encryption) { item in
                guard failure == nil else { return }
                switch item {
                case .segment: segments += 1
                case .record(let record):
                    if let prefix, record.type == .batch || !record.key.starts(with: prefix) { return }
                    records += 1
                case .damage: damaged += 1
                }
                if json {
                    do throws(ToolError) { output.write(try JSONLines.line(JSONItem(item), encoder: encoder)) } catch { failure = error }
                } else {
                    output.line(Self.text(item))
                }
            }
        }
        if let failure { throw failure }
        if !json {
            output.line("\(Self.count(segments, "segment")), \(Self.count(records, "record")), \(Self.count(damaged, "damaged range"))")
        }
        return .success
    }

    // MARK: Text

    static func text(_ item: InspectedItem) -> String {
        switch item {
        case .segment(let segment):
            return "segment \(segment.id): \(segment.file), \(segment.bytes) bytes, base seq \(segment.baseSeq.map(String.init) ?? "unknown (invalid header)")"
                + (segment.dictionaryID.map { ", dictionary \($0)" } ?? "")
                + (segment.keyPrefix.isEmpty ? "" : ", key prefix " + KeyEscaping.escape(segment.keyPrefix))
        case .record(let record):
            var fields = [
                "\(record.segmentID):\(record.offset)", typeName(record.type), "seq=\(record.seq)",
                "bytes=\(record.bytes)", "stored=\(record.storedBytes)", "value=\(record.valueBytes)",
            ]
            let flags = flagNames(record)
            if !flags.isEmpty { fields.append("flags=" + flags.joined(separator: ",")) }
            if let expiry = record.expiresAtMilliseconds { fields.append("expires=\(timestamp(expiry))") }
            if let committed = record.committedSeqs {
                fields.append("commits=\(committed.lowerBound)...\(committed.upperBound - 1)")
            } else if record.type != .batch {
                fields.append("key=" + KeyEscaping.escape(record.key))
            }
            return fields.joined(separator: " ")
        case .damage(let problem):
            let segment = problem.segmentID.map(String.init) ?? "?"
            return "\(segment):\(problem.offset) damaged bytes=\(problem.length) kind=\(problem.kind.rawValue) reason=\(problem.reason)"
        }
    }

    static func typeName(_ type: RecordType) -> String {
        switch type {
        case .put: "put"
        case .delete: "delete"
        case .batch: "batch-commit"
        }
    }

    static func flagNames(_ record: InspectedRecord) -> [String] {
        var names: [String] = []
        if record.isCompressed { names.append("lz4") }
        if record.usesDictionary { names.append("dictionary") }
        if record.expiresAtMilliseconds != nil { names.append("expires") }
        if record.isBatchMember { names.append("batch") }
        if record.elidedKeyBytes > 0 { names.append("key-prefix") }
        return names
    }

    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)

    /// `2026-12-01T10:00:00.000Z`
    static func timestamp(_ milliseconds: UInt64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(timestampStyle)
    }

    private static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }

    // MARK: JSON

    /// One line of `dump --json`.
    struct JSONItem: Encodable {
        /// "segment", "record" or "damage".
        var kind: String
        var segment: UInt64?
        var file: String?
        var offset: Int64?
        var bytes: Int64
        var baseSeq: UInt64?
        var dictionary: UInt32?
        /// A segment's key prefix (escaped as keys are), when it has one.
        var keyPrefix: String?
        /// How many of a record's key bytes are its segment's key prefix's, when any are.
        var elidedKeyBytes: Int?
        var type: String?
        var seq: UInt64?
        var storedBytes: Int?
        var valueBytes: Int?
        var flags: [String]?
        var expiresAtMilliseconds: UInt64?
        var key: String?
        var keyBase64: String?
        var commitsFirstSeq: UInt64?
        var commitsLastSeq: UInt64?
        /// For damage: "record", "segment-header", "torn-tail" or "uncommitted-batch".
        var damage: String?
        var reason: String?

        init(_ item: InspectedItem) {
            switch item {
            case .segment(let segment):
                kind = "segment"
                self.segment = segment.id
                file = segment.file
                bytes = segment.bytes
                baseSeq = segment.baseSeq
                dictionary = segment.dictionaryID
                keyPrefix = segment.keyPrefix.isEmpty ? nil : KeyEscaping.escape(segment.keyPrefix)
            case .record(let record):
                kind = "record"
                segment = record.segmentID
                offset = record.offset
                bytes = Int64(record.bytes)
                type = typeName(record.type)
                seq = record.seq
                storedBytes = record.storedBytes
                valueBytes = record.valueBytes
                flags = flagNames(record)
                elidedKeyBytes = record.elidedKeyBytes > 0 ? record.elidedKeyBytes : nil
                expiresAtMilliseconds = record.expiresAtMilliseconds
                if let committed = record.committedSeqs {
                    commitsFirstSeq = committed.lowerBound
                    commitsLastSeq = committed.upperBound - 1
                } else if record.type != .batch {
                    if let text = String(validating: record.key, as: UTF8.self) { key = text } else { keyBase64 = Data(record.key).base64EncodedString() }
                }
            case .damage(let problem):
                kind = "damage"
                segment = problem.segmentID
                file = problem.file
                offset = problem.offset
                bytes = problem.length
                damage = problem.kind.rawValue
                reason = problem.reason
            }
        }
    }
}
