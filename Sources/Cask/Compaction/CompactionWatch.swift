/// What the writer keeps to compact a small store on its own (``CaskStore/Options/idleCompactionDelay``).
///
/// The seal-time policy never sees a store whose data fits in its active segment: an app's store
/// of one logged-in user, rewritten at every login and logout, would grow by a record per write
/// until the segment filled (64 MiB by default). So the writer counts what it appends and, on two
/// occasions, asks whether such a store is mostly dead (``Compactor/smallStoreIsDue(floor:)``):
/// once writes pause for the idle delay, and once per ``burstStep`` appended while they go on.
/// If it is, the whole store is compacted, its active segment sealed first
/// (``CaskStore/compactSmallStore(_:)``).
///
/// Lives in ``StoreWriter``, under the writer mutex; the write path pays an add and two compares.
struct CompactionWatch {
    /// Dead bytes a store must hold before an idle check compacts it: below a page there is
    /// nothing to give back.
    static let idleFloor: Int64 = 4096
    /// While writes go on, the store is looked at once per this many bytes appended, and compacted
    /// if its dead bytes pass this many and its live bytes. A compaction seals the active segment,
    /// whose successor's creation syncs (about a millisecond with writes waiting): at 8 MiB, a store
    /// written without pause loses a few percent of its writes to that.
    static let burstStep: Int64 = 8 << 20
    /// A small store spread over more segments than this is merged whole, dead bytes or not.
    static let segmentsToMerge = 16

    /// Writes since the open (wrapping), and their count when the pending idle check was set.
    private(set) var writes: UInt64 = 0
    private(set) var writesWhenArmed: UInt64 = 0
    /// Whether an idle check is pending.
    private(set) var idleCheckArmed = false
    /// Bytes appended since the last burst check.
    private var appendedSinceCheck: Int64 = 0
    /// Whether a small-store compaction is queued or running: there is never a second one queued.
    var compactionQueued = false

    /// What the write path does after a write that appended `bytes`.
    enum Step {
        case nothing
        /// Set an idle check (none is pending).
        case armIdleCheck
        /// Ask whether the store is due now (``burstStep`` more bytes were appended).
        case checkBurst
    }

    mutating func noteWrite(appending bytes: Int64) -> Step {
        writes &+= 1
        appendedSinceCheck += bytes
        if appendedSinceCheck >= Self.burstStep {
            appendedSinceCheck = 0
            return .checkBurst
        }
        return idleCheckArmed ? .nothing : .armIdleCheck
    }

    /// Notes that an idle check is set, as of the writes so far.
    mutating func armed() {
        idleCheckArmed = true
        writesWhenArmed = writes
    }

    /// When a pending idle check comes due: whether writes came since it was set (it is then set
    /// again), or the store has been idle for the whole delay (it is then no longer pending).
    mutating func idleCheckFired() -> (idle: Bool, rearm: Bool) {
        if writes != writesWhenArmed {
            writesWhenArmed = writes
            return (false, true)
        }
        idleCheckArmed = false
        return (true, false)
    }

    /// A pending idle check that will not run (the store closed).
    mutating func disarm() { idleCheckArmed = false }
}
