/// Sizes the index ahead of recovery's scans of segments that have no hint file (after a crash,
/// the active segment; after `recover`, or with hints deleted, all of them), so that it is
/// rehashed about once instead of at every growth — each growth rehashes every key so far and
/// zeroes a table 1.46× the last.
///
/// The hint files declare their entry counts, and the index is sized for them before anything is
/// read; a scan has no such count. At doubling checkpoints (4,096 records scanned, then 8,192, …)
/// it projects the records still to come from the records per byte scanned so far, and reserves
/// room for them and the keys already held. Overwritten keys make it overshoot (a record of a key
/// already indexed takes no slot); ``KeyIndex/endRecovery()`` gives back a table left less than
/// half full.
struct ScanSizing {
    /// Bytes of records in the segments to scan (their lengths after the header).
    let bytesToScan: Int64
    /// Held rather than passed with each record: an argument read from recovery's `inout` result
    /// is retained and released around every call.
    private let index: KeyIndex
    private(set) var scannedBytes: Int64 = 0
    private(set) var scannedRecords = 0
    private var checkpoint = 4096
    /// Room reserved beyond the projection, against its error.
    private static let margin = 1.05

    init(bytesToScan: Int64, index: KeyIndex) {
        self.bytesToScan = bytesToScan
        self.index = index
    }

    /// Counts one scanned record of `length` bytes; at a checkpoint, reserves room in the index
    /// for the records the rest of the scan is projected to add.
    mutating func noteScanned(length: Int) {
        scannedRecords += 1
        scannedBytes += Int64(length)
        guard scannedRecords == checkpoint else { return }
        checkpoint *= 2
        guard bytesToScan > scannedBytes else { return }
        let toCome = Double(bytesToScan - scannedBytes) / Double(scannedBytes) * Double(scannedRecords)
        index.reserve(index.count + index.tombstones + Int((toCome * Self.margin).rounded(.up)))
    }
}
