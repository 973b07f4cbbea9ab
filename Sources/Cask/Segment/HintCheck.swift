/// A hint file compared with its segment, record for record: the one judgement of whether a hint
/// agrees with the bytes it describes, for `verify` and repair. (The open does not compare: it
/// trusts a valid hint for the bytes it covers and reads the rest of the segment, FORMAT.md,
/// "Hint files".)
///
/// Built from the hint's bytes, it is given the valid records a read of the segment finds, in file
/// order; ``finish(damage:segmentLength:)`` then says whether the two agree, and which entries
/// describe records the segment no longer holds: inside its damaged ranges, or past its end.
/// Memory: O(entries), the keys packed in one buffer.
package struct HintCheck {
    /// One hint entry (its key in ``keys``).
    package struct Entry {
        package var offset: Int64
        package var type: RecordType
        package var flags: UInt8
        package var seq: UInt64
        package var recordLength: Int
        package var valueLength: Int
        package var expiresAt: UInt64?
        package var keyRange: Range<Int>

        package var end: Int64 { offset + Int64(recordLength) }
    }

    /// What the comparison found.
    package struct Verdict {
        /// Entries in the hint, and the segment bytes it covers.
        package var entries: Int
        package var coveredLength: Int64
        package var segmentLength: Int64
        /// The first disagreement with an intact record (a field, a record the hint does not list,
        /// an entry where the segment holds no record and no damage): the hint is not to be trusted.
        package var mismatch: String?
        /// When there is no mismatch: entries for records inside damaged ranges, and for records past
        /// the segment's end (lost with its tail), in file order.
        package var inDamage: [Entry] = []
        package var pastEnd: [Entry] = []
        /// Entries for records the read found intact but then reported as damage — the members and
        /// commit record of a batch that is not whole (a commit whose count disagrees, say). An open
        /// trusting the hint would apply such a batch, which a read of the segment does not: the
        /// hint no longer describes its segment.
        package var reportedAsDamage: [Entry] = []

        /// Why the hint file is not valid for its segment as it is, or nil when it is: it agrees
        /// with every record and describes nothing else.
        package var problem: String? {
            if let mismatch { return mismatch }
            if !pastEnd.isEmpty {
                return "it describes \(coveredLength) bytes of a segment that holds \(segmentLength): the \(pastEnd.count) record\(pastEnd.count == 1 ? "" : "s") it lists past the end were lost"
            }
            if let first = inDamage.first {
                return "it lists \(inDamage.count) record\(inDamage.count == 1 ? "" : "s") inside damaged ranges of the segment (the first at offset \(first.offset))"
            }
            if let first = reportedAsDamage.first {
                return "it lists \(reportedAsDamage.count) record\(reportedAsDamage.count == 1 ? "" : "s") that the segment reports as damage, a batch that is not whole (the first at offset \(first.offset)): an open trusting the hint would apply it"
            }
            return nil
        }
    }

    package private(set) var entries: [Entry] = []
    /// Key bytes of all entries, back to back (a ``HintEntry``'s key is valid only during its callback).
    package private(set) var keys: [UInt8] = []
    package private(set) var coveredLength: Int64 = 0
    private var next = 0
    private var unmatched: [Int] = []
    private var mismatch: String?

    /// The entries of `hint`, the bytes of segment `segmentID`'s hint file, for a segment of
    /// `segmentLength` bytes — or nil when ``HintFile`` refuses them (``SegmentReader/refusal(of:segmentID:segmentLength:)``
    /// says why). Entries past the segment's end are kept when the hint's header declares them.
    /// `sealing`: an encrypted store's, for the segment; `keyPrefix`: the key prefix the segment's
    /// header names (empty for none), nil when the header is damaged.
    package init?(hint: UnsafeRawBufferPointer, segmentID: UInt64, segmentLength: Int64, sealing: HintFile.Sealing?, keyPrefix: [UInt8]?) {
        // Capped as ``SegmentReader/declaredLength(ofHint:segmentID:sealing:)`` caps it: no segment is longer.
        let declared = min(
            HintFile.declaredSummary(hint, sealing: sealing).flatMap { $0.segmentID == segmentID ? $0.coveredLength : nil } ?? 0, Int64(UInt32.max))
        var entries: [Entry] = []
        var keys: [UInt8] = []
        let summary = HintFile.forEachEntry(
            in: hint, segmentID: segmentID, segmentLength: max(segmentLength, declared), sealing: sealing, keyPrefix: keyPrefix
        ) { entry in
            let start = keys.count
            keys.append(contentsOf: entry.key)
            entries.append(Entry(
                offset: entry.offset, type: entry.type, flags: entry.flags, seq: entry.seq, recordLength: entry.recordLength,
                valueLength: entry.valueLength, expiresAt: entry.expiresAt, keyRange: start..<keys.count))
        }
        guard let summary else { return nil }
        self.entries = entries
        self.keys = keys
        self.coveredLength = summary.coveredLength
    }

    /// The key of `entry`.
    package func key(of entry: Entry) -> ArraySlice<UInt8> { keys[entry.keyRange] }

    /// Compares the valid record the read found at `offset` with the hint. Records must come in
    /// file order.
    package mutating func check(
        offset: Int64, type: RecordType, flags: UInt8, seq: UInt64, recordLength: Int, valueLength: Int, expiresAt: UInt64?,
        key: some Collection<UInt8>
    ) {
        guard mismatch == nil else { return }
        while next < entries.count, entries[next].offset < offset {
            unmatched.append(next)
            next += 1
        }
        guard next < entries.count, entries[next].offset == offset else {
            if offset < coveredLength { mismatch = "the segment has a record at offset \(offset) that the hint does not list" }
            return
        }
        let entry = entries[next]
        next += 1
        var differences: [String] = []
        if entry.type != type { differences.append("type") }
        if entry.flags != flags { differences.append("flags") }
        if entry.seq != seq { differences.append("sequence number") }
        if entry.recordLength != recordLength { differences.append("record length") }
        if entry.valueLength != valueLength { differences.append("value length") }
        if entry.expiresAt != expiresAt { differences.append("expiry") }
        if !keys[entry.keyRange].elementsEqual(key) { differences.append("key") }
        if !differences.isEmpty {
            mismatch = "the entry for the record at offset \(offset) differs from it in: \(differences.joined(separator: ", "))"
        }
    }

    /// ``check(offset:type:flags:seq:recordLength:valueLength:expiresAt:key:)`` for a record read
    /// whole: its header and bytes, in a segment whose key prefix is `keyPrefix`.
    package mutating func check(offset: Int64, header: RecordHeader, record: UnsafeRawBufferPointer, keyPrefix: UnsafeRawBufferPointer) {
        header.withKey(in: record, prefix: keyPrefix) { key in
            check(
                offset: offset, type: header.type, flags: header.flags, seq: header.seq, recordLength: header.recordLength,
                valueLength: header.valueLength, expiresAt: header.expiresAt, key: key)
        }
    }

    /// After the read: the verdict, given the segment's damaged ranges and its length.
    package func finish(damage: [DamagedRange], segmentLength: Int64) -> Verdict {
        var verdict = Verdict(entries: entries.count, coveredLength: coveredLength, segmentLength: segmentLength, mismatch: mismatch)
        guard mismatch == nil else { return verdict }
        let ranges = damage.filter { $0.kind != .segmentHeader }
        func insideDamage(_ entry: Entry) -> Bool { ranges.contains { $0.contains(entry.offset, length: Int64(entry.recordLength)) } }
        // Entries matched with an intact record that the read then reported as damage.
        if !ranges.isEmpty {
            let unmatchedSet = Set(unmatched)
            verdict.reportedAsDamage = (0..<next).filter { !unmatchedSet.contains($0) }.map { entries[$0] }.filter(insideDamage)
        }
        for index in unmatched + Array(next..<entries.count) {
            let entry = entries[index]
            if entry.end > segmentLength {
                verdict.pastEnd.append(entry)
            } else if insideDamage(entry) {
                verdict.inDamage.append(entry)
            } else {
                verdict.mismatch = "the hint lists a record at offset \(entry.offset) that the segment does not hold"
                verdict.inDamage = []
                verdict.pastEnd = []
                verdict.reportedAsDamage = []
                return verdict
            }
        }
        return verdict
    }
}
