import Cask
import Foundation

/// `cask stat <dir> [--json] [--key-file <file>]`
struct StatCommand: Subcommand {
    static let help = CommandHelp(
        name: "stat",
        abstract: "Show key counts and space use, per store and segment.",
        discussion: [
            "Live bytes are the records the index points at (what compaction keeps); dead bytes are overwritten and deleted records, tombstones and damage (what compaction reclaims); disk bytes are all files in the store directory, hint files included. Per segment: its size, its records (live and dead), live and dead bytes, value bytes, compression ratio, and its oldest and newest sequence numbers.",
            "Value bytes are the lengths of the values as written (uncompressed), of every record. The compression ratio is value bytes divided by record bytes on disk (segment bytes without the 40-byte segment header): keys and record headers count as stored bytes, so a ratio above 1 means compression saves more than they cost, and values that do not compress give a ratio under 1.",
            "DICT is the dictionary a segment's records are compressed against (docs/dictionaries.md), '-' for none; the dictionaries table (shown when a segment names one) sums the segments of each, and gives the size of its file.",
            "Encryption is the algorithm an encrypted store's files are sealed with (AES-256-GCM or XChaCha20-Poly1305; \"encrypted\" and \"encryptionAlgorithm\", aes256gcm or xchacha20poly1305, in JSON), or none.",
            "Opens the store read-only and takes no lock, so it works while another process writes. Damage found while opening is counted (\"damagedRanges\"); 'cask verify' lists it.",
        ],
        arguments: [StoreAccess.directoryArgument],
        options: [StoreAccess.jsonFlag, KeyFile.option])

    let directory: String
    let json: Bool
    let encryption: Encryption

    init(parsing arguments: ParsedArguments) throws(ToolError) {
        directory = try arguments.path("dir")
        json = arguments.flag("json")
        encryption = try KeyFile.encryption(arguments)
    }

    struct Report: Encodable {
        struct Segment: Encodable {
            var id: UInt64
            var file: String
            var bytes: Int64
            var records: Int
            var liveRecords: Int
            /// Overwritten puts, deletes, tombstones and batch commits.
            var deadRecords: Int
            var liveBytes: Int64
            var deadBytes: Int64
            /// Uncompressed bytes of the values of all records.
            var valueBytes: Int64
            /// `valueBytes` ÷ record bytes on disk; absent for a segment with no records.
            var compressionRatio: Double?
            var minSeq: UInt64?
            var maxSeq: UInt64?
            /// The dictionary the segment names; absent for none.
            var dictionary: UInt32?
        }

        /// The segments compressed against one dictionary (`id` absent: against none), summed.
        struct Dictionary: Encodable {
            var id: UInt32?
            var file: String?
            /// The dictionary file's size (header and content); absent for none.
            var bytes: Int64?
            var segments: Int
            var valueBytes: Int64
            /// `valueBytes` ÷ the record bytes of those segments.
            var compressionRatio: Double?
        }

        var directory: String
        var encrypted: Bool
        /// aes256gcm or xchacha20poly1305; absent for a store that is not encrypted.
        var encryptionAlgorithm: String?
        var keys: Int
        var liveBytes: Int64
        var deadBytes: Int64
        var segmentBytes: Int64
        var diskBytes: Int64
        var valueBytes: Int64
        var compressionRatio: Double?
        var damagedRanges: Int
        var segments: [Segment]
        var dictionaries: [Dictionary]
        /// Stray files (a store file's name gone wrong): ignored, never removed.
        var ignoredFiles: [String]
    }

    func run(_ output: Output) throws(ToolError) -> ExitCode {
        let store = try StoreAccess.openForReading(directory, encryption: encryption)
        let algorithm = store.encryptionAlgorithm
        let statistics = try CaskError.wrap { () throws(CaskError) in try store.statistics() }
        let damaged = store.recoveryReport.damagedRanges.count + store.recoveryReport.truncations.count
        try StoreAccess.close(store)
        let report = Report(
            directory: directory,
            encrypted: algorithm != nil,
            encryptionAlgorithm: algorithm?.name,
            keys: statistics.keys,
            liveBytes: statistics.liveBytes,
            deadBytes: statistics.deadBytes,
            segmentBytes: statistics.segmentBytes,
            diskBytes: try diskBytes(),
            valueBytes: statistics.segments.reduce(0) { $0 + $1.valueBytes },
            compressionRatio: Self.ratio(
                statistics.segments.reduce(0) { $0 + $1.valueBytes },
                statistics.segments.reduce(0) { $0 + Self.recordBytes($1) }),
            damagedRanges: damaged,
            segments: statistics.segments.map { segment in
                Report.Segment(
                    id: segment.id, file: SegmentName.segment(segment.id), bytes: segment.fileBytes, records: segment.records,
                    liveRecords: segment.liveRecords, deadRecords: segment.records - segment.liveRecords,
                    liveBytes: segment.liveBytes, deadBytes: segment.deadBytes, valueBytes: segment.valueBytes,
                    compressionRatio: Self.ratio(segment.valueBytes, Self.recordBytes(segment)),
                    minSeq: segment.minSeq, maxSeq: segment.maxSeq, dictionary: segment.dictionaryID)
            },
            dictionaries: dictionaries(statistics.segments),
            ignoredFiles: store.recoveryReport.ignoredFiles)
        if json {
            try output.json(report)
        } else {
            output.write(text(report))
            if damaged > 0 {
                output.error("warning: \(damaged) damaged byte ranges were skipped; run 'cask verify \(directory)' for details\n")
            }
            for file in report.ignoredFiles { output.error("note: ignored \(file)\n") }
        }
        return .success
    }

    private func text(_ report: Report) -> String {
        var summary = TextTable([.init(title: "", rightAligned: false), .init(title: "", rightAligned: true)])
        summary.showsTitles = false
        summary.rows = [
            ["keys:", "\(report.keys)"],
            ["live bytes:", "\(report.liveBytes)"],
            ["dead bytes:", "\(report.deadBytes)"],
            ["segment bytes:", "\(report.segmentBytes)"],
            ["disk bytes:", "\(report.diskBytes)"],
            ["value bytes:", "\(report.valueBytes)"],
            ["compression ratio:", Self.format(report.compressionRatio)],
            ["segments:", "\(report.segments.count)"],
        ]
        let encryption = report.encryptionAlgorithm.flatMap(EncryptionAlgorithm.init(name:))?.description ?? "none"
        var result = "store: \(report.directory)\nencryption: \(encryption)\n" + summary.text
        guard !report.segments.isEmpty else { return result }
        var table = TextTable([
            .init(title: "ID", rightAligned: true), .init(title: "FILE", rightAligned: false),
            .init(title: "BYTES", rightAligned: true), .init(title: "RECORDS", rightAligned: true),
            .init(title: "LIVE", rightAligned: true), .init(title: "DEAD", rightAligned: true),
            .init(title: "LIVE BYTES", rightAligned: true), .init(title: "DEAD BYTES", rightAligned: true),
            .init(title: "VALUE BYTES", rightAligned: true), .init(title: "RATIO", rightAligned: true),
            .init(title: "DICT", rightAligned: true), .init(title: "SEQ", rightAligned: false),
        ])
        for segment in report.segments {
            let seqs = segment.minSeq.map { min in "\(min)-\(segment.maxSeq ?? min)" } ?? "-"
            table.add([
                "\(segment.id)", segment.file, "\(segment.bytes)", "\(segment.records)", "\(segment.liveRecords)",
                "\(segment.deadRecords)", "\(segment.liveBytes)", "\(segment.deadBytes)", "\(segment.valueBytes)",
                Self.format(segment.compressionRatio), segment.dictionary.map(String.init) ?? "-", seqs,
            ])
        }
        result += "\n" + table.text
        guard report.dictionaries.contains(where: { $0.id != nil }) else { return result }
        var dictionaries = TextTable([
            .init(title: "DICT", rightAligned: true), .init(title: "FILE", rightAligned: false), .init(title: "BYTES", rightAligned: true),
            .init(title: "SEGMENTS", rightAligned: true), .init(title: "VALUE BYTES", rightAligned: true), .init(title: "RATIO", rightAligned: true),
        ])
        for dictionary in report.dictionaries {
            dictionaries.add([
                dictionary.id.map(String.init) ?? "-", dictionary.file ?? "(none)", dictionary.bytes.map(String.init) ?? "-",
                "\(dictionary.segments)", "\(dictionary.valueBytes)", Self.format(dictionary.compressionRatio),
            ])
        }
        result += "\n" + dictionaries.text
        return result
    }

    /// The segments grouped by the dictionary they name, none first.
    private func dictionaries(_ segments: [SegmentStats]) -> [Report.Dictionary] {
        Dictionary(grouping: segments, by: \.dictionaryID).map { id, group in
            let valueBytes = group.reduce(0) { $0 + $1.valueBytes }
            let file = id.map { SegmentName.dictionary(UInt64($0)) }
            return Report.Dictionary(
                id: id, file: file, bytes: file.flatMap { try? FileManager.default.attributesOfItem(atPath: directory + "/" + $0)[.size] as? Int64 },
                segments: group.count, valueBytes: valueBytes,
                compressionRatio: Self.ratio(valueBytes, group.reduce(0) { $0 + Self.recordBytes($1) }))
        }.sorted { ($0.id ?? 0) < ($1.id ?? 0) }
    }

    /// The bytes of a segment's records: the file without its header.
    private static func recordBytes(_ segment: SegmentStats) -> Int64 {
        max(0, segment.fileBytes - segment.headerBytes)
    }

    /// `valueBytes` ÷ `storedBytes`, to three decimals; nil when nothing is stored.
    static func ratio(_ valueBytes: Int64, _ storedBytes: Int64) -> Double? {
        guard storedBytes > 0 else { return nil }
        return (Double(valueBytes) / Double(storedBytes) * 1000).rounded() / 1000
    }

    private static func format(_ ratio: Double?) -> String {
        ratio.map { String(format: "%.2f", $0) } ?? "-"
    }

    /// The size of every regular file in the store directory.
    private func diskBytes() throws(ToolError) -> Int64 {
        let manager = FileManager.default
        do {
            var total: Int64 = 0
            for name in try manager.contentsOfDirectory(atPath: directory) {
                let attributes = try manager.attributesOfItem(atPath: directory + "/" + name)
                guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
                total += (attributes[.size] as? NSNumber)?.int64Value ?? 0
            }
            return total
        } catch {
            throw .failure("cannot list \(directory): \(error.localizedDescription)")
        }
    }
}
