extension CaskStore {
    /// Keys a listing visits at a time: at most a leaf of the ordered view without the lock, and
    /// when it falls back to the index lock, a slice under it (a writer then waits at most for one
    /// slice, a few microseconds, whatever the size of the store or of the listing).
    static let listingSlice = 64
    /// The same for a walk under the lock that also looks up each key's location (a probe of the
    /// hash table per key, their cache misses overlapped) and its segment's file: a quarter as many
    /// keys, a hold of 2–3 µs.
    static let locatingSlice = 16

    /// The keys in `range`, in byte order (or descending), expired keys excluded.
    ///
    /// ```swift
    /// let page = try store.keys(in: .prefix("drafts/ada/"), limit: 20, order: .descending)
    /// let next = try store.keys(in: .prefix("drafts/ada/"), after: page.last, limit: 20, order: .descending)
    /// ```
    ///
    /// `after` resumes a listing: only keys after it in `order` are listed (it need not exist).
    /// `limit` caps the number of keys returned.
    ///
    /// **Consistency.** The keys are read from the index's ordered view a leaf (at most 64 keys) at
    /// a time without the index lock, each leaf checked unchanged by writers while it was read (and
    /// read again if it was not), each resuming where the one before ended. A key live for the
    /// whole call is listed exactly once; a key created or deleted during the call may be listed
    /// or not; no key is listed twice or out of order. Writers never wait for a listing. (After
    /// 8 failed reads of one leaf, while the index rewrites its key arena, or in a store where some
    /// key has had an expiry, which only the lock can check, a slice of at most 64 keys is read
    /// under the shared index lock instead: writers then wait at most for one slice.)
    ///
    /// Complexity: O(log n) per leaf (about 55 keys), O(1) per key listed, and one allocation per
    /// key returned. Thread-safe.
    public func keys(in range: KeyRange = .all, after: [UInt8]? = nil, limit: Int = .max, order: KeyOrder = .ascending) throws(CaskError) -> [[UInt8]] {
        guard limit >= 0 else { throw .invalidArgument(name: "limit", reason: "is \(limit); a listing's limit must be 0 or more") }
        var cursor = KeyRangeCursor(range, after: after, order: order)
        var keys: [[UInt8]] = []
        var slice = ByteBuffer(capacity: 1024)
        var ends: [Int] = []
        let now = Self.nowMilliseconds()
        while !cursor.finished && keys.count < limit {
            slice.count = 0
            ends.removeAll(keepingCapacity: true)
            try cursor.nextKeys(of: self, budget: min(Self.listingSlice, limit - keys.count), now: now, keys: &slice, ends: &ends)
            slice.withUnsafeBytes { all in
                var start = 0
                for end in ends {
                    keys.append(Array(all[start..<end]))
                    start = end
                }
            }
        }
        return keys
    }

    /// The keys that start with `prefix`: ``keys(in:after:limit:order:)`` of `.prefix(prefix)`.
    public func keys(prefix: [UInt8], after: [UInt8]? = nil, limit: Int = .max, order: KeyOrder = .ascending) throws(CaskError) -> [[UInt8]] {
        try keys(in: .prefix(prefix), after: after, limit: limit, order: order)
    }

    /// The number of keys in `range`, expired keys excluded. O(1) for `.all` (as ``count``);
    /// otherwise O(log n) per leaf plus O(1) per key counted, walked as
    /// ``keys(in:after:limit:order:)`` walks them, with no allocation per key.
    public func count(in range: KeyRange) throws(CaskError) -> Int {
        if range == .all {
            return try state.read { (shared) throws(CaskError) in
                if shared.closed { throw CaskError.closed(path: directory) }
                return shared.index.count - (shared.expiries.isEmpty ? 0 : shared.expiries.expiredCount(now: Self.nowMilliseconds()))
            }
        }
        var cursor = KeyRangeCursor(range, after: nil, order: .ascending)
        var count = 0
        var slice = ByteBuffer(capacity: 1024)
        var ends: [Int] = []
        let now = Self.nowMilliseconds()
        while !cursor.finished {
            slice.count = 0
            ends.removeAll(keepingCapacity: true)
            try cursor.nextKeys(of: self, budget: Self.listingSlice * 4, now: now, keys: &slice, ends: &ends)
            count += ends.count
        }
        return count
    }

    /// The number of keys that start with `prefix`: ``count(in:)`` of `.prefix(prefix)`.
    public func count(prefix: [UInt8]) throws(CaskError) -> Int {
        try count(in: .prefix(prefix))
    }

    /// Calls `body` with each key in `range`, in `order`, without copying keys into arrays: the
    /// fastest way to list keys. The same keys, consistency and cost as
    /// ``keys(in:after:limit:order:)``, without the allocations; `body` runs with no lock held (it
    /// may call the store, writes included) and an error it throws stops the walk and is rethrown.
    ///
    /// `key` is valid only during the call to `body`: copy what you keep.
    public func forEachKey(
        in range: KeyRange = .all, after: [UInt8]? = nil, order: KeyOrder = .ascending,
        _ body: (_ key: UnsafeRawBufferPointer) throws(CaskError) -> Void
    ) throws(CaskError) {
        var cursor = KeyRangeCursor(range, after: after, order: order)
        var keys = ByteBuffer(capacity: 1024)
        var ends: [Int] = []
        ends.reserveCapacity(Self.listingSlice)
        let now = Self.nowMilliseconds()
        while !cursor.finished {
            keys.count = 0
            ends.removeAll(keepingCapacity: true)
            try cursor.nextKeys(of: self, budget: Self.listingSlice, now: now, keys: &keys, ends: &ends)
            try keys.withUnsafeBytes { (all) throws(CaskError) in
                var start = 0
                for end in ends {
                    try body(UnsafeRawBufferPointer(rebasing: all[start..<end]))
                    start = end
                }
            }
        }
    }
}

extension CaskStore {
    /// Builds the index's ordered view if it does not exist yet: once per open, on the first
    /// listing, under the exclusive index lock (writers and readers wait for it: about a quarter
    /// of a second for a million keys). From then on every put of a new key and every delete keeps
    /// it up.
    func ensureOrderedView() throws(CaskError) {
        let built = try state.read { (shared) throws(CaskError) -> Bool in
            if shared.closed { throw CaskError.closed(path: directory) }
            return shared.index.hasOrderedView
        }
        if built { return }
        try state.write { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed(path: directory) }
            shared.index.buildOrderedView()
        }
    }
}

/// A walk over a key range in slices: each slice visits at most a budget of keys under the
/// store's shared index lock, and the next resumes after the last key visited. Not thread-safe;
/// owned by one listing.
struct KeyRangeCursor {
    private(set) var span: KeySpan
    let descending: Bool
    private(set) var finished = false
    /// Whether this cursor has seen the ordered view built: once built it lasts as long as the
    /// open store, so later slices take the lock once each, not twice.
    private var viewBuilt = false

    init(_ range: KeyRange, after: [UInt8]?, order: KeyOrder) {
        descending = order.isDescending
        span = after.map { range.span.resuming(after: $0, descending: order.isDescending) } ?? range.span
    }

    /// Appends the next keys of the range, at most `budget` (expired ones left out), to `keys`,
    /// each followed by an entry of `ends` (the length of `keys` after it): one leaf of the
    /// ordered view without the index lock (``KeyIndex/sliceWithoutLock(_:descending:limit:keys:ends:)``)
    /// when no key of the store ever had an expiry, else (or when the walk without the lock falls
    /// back) a slice under the shared lock, which can check expiries. Sets ``finished`` when the
    /// range has no more keys. Throws ``CaskError/closed(path:)``.
    mutating func nextKeys(
        of store: CaskStore, budget: Int, now: UInt64, keys: inout ByteBuffer, ends: inout [Int]
    ) throws(CaskError) {
        if try nextKeysWithoutLock(of: store, budget: budget, keys: &keys, ends: &ends, expiriesAllowed: false) { return }
        try nextSlice(of: store, budget: budget, withLocations: false) { shared, key, _ in
            guard shared.expiries.isEmpty || !shared.expiries.isExpired(key, now: now) else { return }
            keys.append(key)
            ends.append(keys.count)
        }
    }

    /// The keys of ``nextKeys(of:budget:now:keys:ends:)`` without the index lock, expired or
    /// not: false, having appended nothing, when only a slice under the lock can take this step
    /// (or, unless `expiriesAllowed`, when some key of the store had an expiry).
    mutating func nextKeysWithoutLock(
        of store: CaskStore, budget: Int, keys: inout ByteBuffer, ends: inout [Int], expiriesAllowed: Bool
    ) throws(CaskError) -> Bool {
        precondition(budget > 0)
        if !viewBuilt {
            try store.ensureOrderedView()
            viewBuilt = true
        }
        if store.isClosed.load(ordering: .acquiring) { throw CaskError.closed(path: store.directory) }
        let span = span, descending = descending
        let outcome = store.state.withoutLocking { shared -> KeyIndex.UnlockedSlice in
            guard expiriesAllowed || !shared.expiriesUsed.load(ordering: .acquiring) else { return .fallBack }
            return shared.index.sliceWithoutLock(span, descending: descending, limit: budget, keys: &keys, ends: &ends)
        }
        guard case .listed(let next) = outcome else { return false }
        if let next { self.span = next } else { finished = true }
        return true
    }

    /// Visits the next keys of the range, at most `budget` of them, under the shared index lock:
    /// `visit` gets the shared state, the key (valid only during the call) and, `withLocations`, its
    /// location. Sets ``finished`` when the range has no more keys. Throws ``CaskError/closed(path:)``.
    mutating func nextSlice(
        of store: CaskStore, budget: Int, withLocations: Bool,
        _ visit: (CaskStore.SharedState, UnsafeRawBufferPointer, RecordLocation?) -> Void
    ) throws(CaskError) {
        precondition(budget > 0)
        var visited = 0
        var last: [UInt8]?
        let span = span, descending = descending
        if !viewBuilt {
            try store.ensureOrderedView()
            viewBuilt = true
        }
        try store.state.read { (shared) throws(CaskError) in
            if shared.closed { throw CaskError.closed(path: store.directory) }
            if withLocations {
                shared.index.walkLocations(span, descending: descending, limit: budget) { key, location in
                    visit(shared, key, location)
                    visited += 1
                    if visited < budget { return true }
                    last = Array(key)
                    return false
                }
            } else {
                shared.index.walk(span, descending: descending) { key in
                    visit(shared, key, nil)
                    visited += 1
                    if visited < budget { return true }
                    last = Array(key)
                    return false
                }
            }
        }
        if let last {
            self.span = span.resuming(after: last, descending: descending)
        } else {
            finished = true
        }
    }
}
