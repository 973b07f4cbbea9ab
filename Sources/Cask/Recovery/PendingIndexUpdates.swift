/// Index updates that recovery applies a few records behind the one it has just read from a hint
/// file or a segment.
///
/// Each update's index lines (its home group's control bytes, entries and sequence numbers) are
/// prefetched when it is queued; by its turn, ``depth`` records later, they are in the cache. The
/// cache misses of consecutive records then overlap instead of following one another: a hint file
/// or a segment is read in order, but its keys land at random places in the table. (A scan applied
/// its records at once while the index grew its way there, mostly in the cache; sized ahead by
/// ``ScanSizing``, its misses took a quarter of a scanning open until they overlapped too.)
///
/// Order is kept: updates come out in the order they went in, and ``drain(_:)`` hands back the
/// rest, so the index ends as if each update had been applied at once. A key longer than
/// ``maxQueuedKeyLength`` is not queued: the caller drains the queue, then applies it. A queue of
/// depth 0 hands each update straight back. Not thread-safe; one per hint file or scan.
final class PendingIndexUpdates {
    struct Update {
        var type: RecordType
        var seq: UInt64
        var expiresAt: UInt64?
        var location: RecordLocation
        /// Valid only during the call that receives the update.
        var key: UnsafeRawBufferPointer
    }

    /// How far behind a hint's updates are applied: enough misses in flight to cover a memory
    /// latency at recovery's pace.
    static let hintDepth = 8
    /// How many updates wait (``hintDepth``, or 0).
    let depth: Int
    /// Keys up to this length are copied into the queue; a longer one is applied at once.
    static let maxQueuedKeyLength = 256

    // Reached only by the recovery that owns the queue, one call at a time: the dynamic exclusivity
    // checks of a class's properties cost a tenth of recovery's time here.
    @exclusivity(unchecked) private var updates: [Update] = []
    /// Where the oldest update is, once the queue is full.
    @exclusivity(unchecked) private var oldest = 0
    /// `depth + 1` slots of `maxQueuedKeyLength` bytes, taken in turn, one per update's key: those
    /// of the `depth` queued updates, and that of the one ``add(key:type:seq:expiresAt:location:)``
    /// last returned, which stays valid until the next call.
    private let keys: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var nextKeySlot = 0
    /// The index whose lines ``add(key:type:seq:expiresAt:location:)`` prefetches. Held here rather
    /// than passed with each update: an argument read from the caller's `inout` result is retained
    /// and released around every call, and those atomic operations wait for the stores in flight.
    private let index: KeyIndex

    init(index: KeyIndex, depth: Int = PendingIndexUpdates.hintDepth) {
        self.index = index
        self.depth = depth
        keys = UnsafeMutableRawPointer.allocate(byteCount: depth == 0 ? 0 : (depth + 1) * Self.maxQueuedKeyLength, alignment: 8)
        updates.reserveCapacity(depth)
    }

    deinit { keys.deallocate() }

    /// Queues an update of `key` (at most ``maxQueuedKeyLength`` bytes), after prefetching its index
    /// lines; once ``depth`` updates wait, returns the oldest, for the caller to apply before its
    /// next call (its key is valid until then). At depth 0, returns the update itself.
    ///
    /// Returns a value rather than calling back: a closure that may reach anything made the
    /// optimizer retain and release the queue around each call, two atomic operations per record
    /// that wait for the index stores before them (a third of an `open`'s time).
    func add(key: UnsafeRawBufferPointer, type: RecordType, seq: UInt64, expiresAt: UInt64?, location: RecordLocation) -> Update? {
        guard depth > 0 else { return Update(type: type, seq: seq, expiresAt: expiresAt, location: location, key: key) }
        precondition(key.count <= Self.maxQueuedKeyLength, "a key this long is applied at once, not queued")
        index.prefetch(key)
        let copy = keys + nextKeySlot * Self.maxQueuedKeyLength
        nextKeySlot = nextKeySlot == depth ? 0 : nextKeySlot + 1
        if let base = key.baseAddress { copy.copyMemory(from: base, byteCount: key.count) }
        let update = Update(type: type, seq: seq, expiresAt: expiresAt, location: location, key: UnsafeRawBufferPointer(start: copy, count: key.count))
        guard updates.count == depth else {
            updates.append(update)
            return nil
        }
        let due = updates[oldest]
        updates[oldest] = update
        oldest = oldest == depth - 1 ? 0 : oldest + 1
        return due
    }

    /// Applies every update still waiting, oldest first, and empties the queue.
    func drain(_ apply: (Update) -> Void) {
        for step in 0..<updates.count { apply(updates[(oldest + step) % updates.count]) }
        updates.removeAll(keepingCapacity: true)
        oldest = 0
    }
}
