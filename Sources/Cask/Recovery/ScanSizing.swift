/// Sizes the index ahead of recovery's scans of segments that have no hint file (after a crash,
/// the active segment; after `recover`, or with hints deleted, all of them), so that it is
/// rehashed about once instead of at every growth — each growth rehashes every key so far and
/// zeroes a table 1.46× the last.
///
/// The hint files declare their entry counts, and the index is sized for them before anything is
/// read; a scan has no such count. At doubling checkpoints (4,096 records scanned, then 8,192, …)
/// it projects the records still to come from the records per byte since the last checkpoint (the
/// later segments' records may be smaller: those of a segment that names a key prefix are), and the
/// slots they will take from the share of those records that took one (a record of a key already
/// indexed takes none), and reserves room for those and the slots already used.
/// A store whose later records overwrite its earlier keys makes it overshoot by at most the records
/// it scans (``KeyIndex/endRecovery()`` gives back a table left less than half full); one that
/// overwrites a few keys again and again reserves little.
struct ScanSizing {
    /// Bytes of records in the segments to scan (their lengths after the header).
    let bytesToScan: Int64
    /// Held rather than passed with each record: an argument read from recovery's `inout` result
    /// is retained and released around every call.
    private let index: KeyIndex
    private var scannedBytes: Int64 = 0
    private var scannedRecords = 0
    private var checkpoint = 4096
    /// Records and bytes scanned and slots used (keys and tombstones) at the last checkpoint.
    private var recordsAtCheckpoint = 0
    private var bytesAtCheckpoint: Int64 = 0
    private var slotsAtCheckpoint: Int
    /// Room reserved beyond the projection, against its error.
    private static let margin = 1.05

    init(bytesToScan: Int64, index: KeyIndex) {
        self.bytesToScan = bytesToScan
        self.index = index
        slotsAtCheckpoint = index.count + index.tombstones
    }

    /// Counts one scanned record of `length` bytes; at a checkpoint, reserves room in the index
    /// for the keys the rest of the scan is projected to add.
    mutating func noteScanned(length: Int) {
        scannedRecords += 1
        scannedBytes += Int64(length)
        guard scannedRecords == checkpoint else { return }
        checkpoint *= 2
        let slots = index.count + index.tombstones
        // Slots hint files filled between checkpoints count too: room they needed anyway.
        let records = scannedRecords - recordsAtCheckpoint, bytes = max(scannedBytes - bytesAtCheckpoint, 1)
        let newShare = min(Double(max(slots - slotsAtCheckpoint, 0)) / Double(records), 1)
        (recordsAtCheckpoint, slotsAtCheckpoint, bytesAtCheckpoint) = (scannedRecords, slots, scannedBytes)
        guard bytesToScan > scannedBytes else { return }
        let recordsToCome = Double(bytesToScan - scannedBytes) / Double(bytes) * Double(records)
        index.reserve(slots + Int((recordsToCome * newShare * Self.margin).rounded(.up)))
    }
}
