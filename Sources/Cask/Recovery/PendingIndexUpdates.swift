/// Index updates that recovery applies a few records behind the one it has just read from a hint
/// file.
///
/// Each update's index lines (its home group's control bytes, entries and sequence numbers) are
/// prefetched when it is queued; by its turn, ``depth`` records later, they are in the cache. The
/// cache misses of consecutive records then overlap instead of following one another: a hint file
/// is read in order, but its keys land at random places in the table.
///
/// Order is kept: updates come out in the order they went in (a key too long to queue first
/// applies everything before it), and ``drain(_:)`` applies the rest, so the index ends as if each
/// update had been applied at once. Not thread-safe; one per hint file being applied.
final class PendingIndexUpdates {
    struct Update {
        var type: RecordType
        var seq: UInt64
        var expiresAt: UInt64?
        var location: RecordLocation
        /// Valid only during the call that receives the update.
        var key: UnsafeRawBufferPointer
    }

    /// How far behind the updates are applied: enough misses in flight to cover a memory latency
    /// at recovery's pace.
    static let depth = 8
    /// Keys up to this length are copied into the queue; a longer one is applied at once.
    static let maxQueuedKeyLength = 256

    // Reached only by the recovery that owns the queue, one call at a time: the dynamic exclusivity
    // checks of a class's properties cost a tenth of recovery's time here.
    @exclusivity(unchecked) private var updates: [Update] = []
    /// Where the oldest update is, once the queue is full.
    @exclusivity(unchecked) private var oldest = 0
    /// `depth` slots of `maxQueuedKeyLength` bytes, one per queued update's key.
    private let keys = UnsafeMutableRawPointer.allocate(byteCount: depth * maxQueuedKeyLength, alignment: 8)

    init() { updates.reserveCapacity(Self.depth) }

    deinit { keys.deallocate() }

    /// Queues an update of `key`, after prefetching its index lines; once ``depth`` updates wait,
    /// first calls `apply` with the oldest.
    func add(
        key: UnsafeRawBufferPointer, type: RecordType, seq: UInt64, expiresAt: UInt64?, location: RecordLocation,
        index: KeyIndex, apply: (Update) -> Void
    ) {
        guard key.count <= Self.maxQueuedKeyLength else {
            drain(apply)
            return apply(Update(type: type, seq: seq, expiresAt: expiresAt, location: location, key: key))
        }
        index.prefetch(key)
        let slot: Int
        if updates.count < Self.depth {
            slot = updates.count
        } else {
            slot = oldest
            apply(updates[slot])
            oldest = oldest == Self.depth - 1 ? 0 : oldest + 1
        }
        let copy = keys + slot * Self.maxQueuedKeyLength
        if let base = key.baseAddress { copy.copyMemory(from: base, byteCount: key.count) }
        let update = Update(type: type, seq: seq, expiresAt: expiresAt, location: location, key: UnsafeRawBufferPointer(start: copy, count: key.count))
        if slot == updates.count { updates.append(update) } else { updates[slot] = update }
    }

    /// Applies every update still waiting, oldest first, and empties the queue.
    func drain(_ apply: (Update) -> Void) {
        for step in 0..<updates.count { apply(updates[(oldest + step) % updates.count]) }
        updates.removeAll(keepingCapacity: true)
        oldest = 0
    }
}
