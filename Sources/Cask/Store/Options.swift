extension CaskStore {
    /// How a store is opened. The defaults suit a service persisting its objects.
    public struct Options: Sendable {
        /// See ``Durability``. Default `.os`.
        public var durability: Durability = .os
        /// Open for reading only: no lock is taken, nothing on disk is changed (a torn tail is
        /// ignored rather than cut), and writes throw ``CaskError/readOnly(path:)``.
        public var readOnly = false
        /// Create the directory (mode 0700) when it does not exist, and the store in it. Default
        /// true. When false, a missing directory throws ``CaskError/directoryMissing(path:)``, and a
        /// writable open of a directory that holds no store ``CaskError/notAStore(path:)``.
        public var createIfMissing = true
        /// The active segment is sealed and a new one started once it reaches this size.
        /// From 4 KiB to 4 GiB. Default 64 MiB.
        public var maxSegmentSize: Int64 = 64 << 20
        /// The largest value accepted: 0 to ``Limits/maxValueLength`` (256 MiB). Default 64 MiB.
        public var maxValueSize = 64 << 20
        /// `.buffered` only: flush when this many bytes are waiting (0 or more). Default 256 KiB.
        public var bufferSize = 256 << 10
        /// `.buffered` only: flush waiting writes at least this often, in seconds (finite, 0 or more;
        /// 0 disables; more than a day is once a day). Default 0.1.
        public var flushInterval: Double = 0.1
        /// Write hint files for sealed segments (and the active one on close), so opens skip values.
        public var writeHints = true
        /// Map the segment files: serve reads from shared memory mappings of them (no syscall per
        /// read) instead of `pread`; and in `.os` and `.fsync` modes, store new records through the
        /// active segment's mapping, into space reserved ahead with `fallocate` (no syscall per
        /// write; a full disk fails the reservation with ``CaskError/diskFull(path:)``; on ext4,
        /// XFS and tmpfs, where a reservation is sure to hold, else with `pwrite`; in `.os` mode
        /// into 2 MiB page-cache pages, which reads map with one TLB entry each). Default
        /// true. The trade-off: with a mapping, a disk I/O error or a segment truncated by another
        /// program while the store is open raises SIGBUS instead of throwing
        /// ``CaskError/io(operation:path:errno:)``. Set false where that matters more than speed.
        public var memoryMapping = true
        /// The former name of ``memoryMapping``, which maps writes too.
        @available(*, deprecated, renamed: "memoryMapping")
        public var memoryMappedReads: Bool {
            get { memoryMapping }
            set { memoryMapping = newValue }
        }
        /// How the object API (`set(_:forKey:)`, `get(_:forKey:)`, typed keys) codes and caches
        /// values: the default coder and the decoded-object cache. Default: binary, no cache.
        public var objects = ObjectOptions()
        /// Whether records are compressed against a dictionary trained from the store's own values,
        /// and when it is trained. Default: trained after 4 MiB of values.
        public var dictionaries = DictionaryOptions()
        /// Whether each new segment names the key prefix that the keys written lately share most,
        /// and records of keys that start with it store only the rest (FORMAT.md, "Segment files",
        /// format 4): db_bench's 16-byte keys save 9 bytes a record. A store that is not encrypted
        /// only. Set false to write only segments a Cask before format 4 can read. Default true.
        public var keyPrefixes = true
        /// Encryption at rest: `.key(key)` seals every record's key and value, every hint file and
        /// every dictionary with an AEAD under the store's key (FORMAT.md, "Encryption"; what it
        /// protects against: docs/security.md). Chosen when a store is created; an encrypted store
        /// opens only with its key. Default `.none`.
        public var encryption = Encryption.none
        /// The file system seam; tests inject faults through it.
        package var fileSystem: any FileSystem = PosixFileSystem()

        public init() {}

        /// Compact in the background when a segment is sealed and the policy below says so. Default true.
        public var automaticCompaction = true
        /// A sealed segment is compacted automatically once this share of its bytes is dead (more
        /// than 0, at most 1). Default 0.5.
        public var compactionDeadRatio = 0.5
        /// ...and only once the whole store holds at least this many dead bytes (0 or more).
        /// Default 16 MiB.
        public var compactionMinDeadBytes: Int64 = 16 << 20
        /// A store small enough to fit in one segment never seals one, so the policy above never
        /// sees it. Such a store is compacted whole (its active segment sealed first) once more of
        /// its bytes are dead than live (at least 4 KiB of them) and no write has come for this
        /// many seconds — also after an open that finds it so; and, while writes go on, whenever
        /// its dead bytes pass both its live bytes and 8 MiB. So a store that is rewritten in
        /// place (a logged-in user saved at login, blanked at logout) stays within twice its live
        /// bytes plus a few file headers once idle. Finite, 0 or more; 0 turns this off (more than a
        /// day waits a day). Default 1.
        public var idleCompactionDelay: Double = 1

        /// How much of a new segment to map for reads.
        var segmentMapLength: Int { memoryMapping ? Int(maxSegmentSize) : 0 }

        /// Whether the writer stores records through the active segment's mapping
        /// (``StoreWriter/flush(bufferLimit:)``): with mapped reads, on a file system that allows it
        /// (``FileSystem/supportsMappedWrites(in:)``),
        /// outside `.buffered` (whose flushes are large: there a `pwrite` measured as fast).
        func writesThroughMapping(in directory: String) -> Bool {
            memoryMapping && !readOnly && durability != .buffered && fileSystem.supportsMappedWrites(in: directory)
        }

        /// Whether the active segment's writable mapping asks for 2 MiB page-cache folios
        /// (``StoreWriter/hugePageReservationStep``): in `.os` mode only.
        var hugePageSegments: Bool { durability == .os }

        public init(durability: Durability, readOnly: Bool = false) {
            self.durability = durability
            self.readOnly = readOnly
        }

        /// Throws ``CaskError/invalidArgument(name:reason:)`` naming the first option out of its
        /// range, as the open does before it touches the directory (a value out of range would
        /// trap, spin or never flush later, far from where it was set).
        func validate() throws(CaskError) {
            func refuse(_ name: String, _ value: Any, _ range: String) -> CaskError {
                .invalidArgument(name: "Options.\(name)", reason: "is \(value); it must be \(range)")
            }
            guard maxSegmentSize >= 4096, maxSegmentSize <= Int64(UInt32.max) else {
                throw refuse("maxSegmentSize", maxSegmentSize, "from 4,096 (4 KiB) to \(UInt32.max) (4 GiB)")
            }
            guard maxValueSize >= 0, maxValueSize <= Limits.maxValueLength else {
                throw refuse("maxValueSize", maxValueSize, "from 0 to \(Limits.maxValueLength) (256 MiB)")
            }
            guard bufferSize >= 0 else { throw refuse("bufferSize", bufferSize, "0 or more bytes") }
            guard flushInterval.isFinite, flushInterval >= 0 else { throw refuse("flushInterval", flushInterval, "0 (off) or more seconds") }
            guard compactionDeadRatio.isFinite, compactionDeadRatio > 0, compactionDeadRatio <= 1 else {
                throw refuse("compactionDeadRatio", compactionDeadRatio, "more than 0 and at most 1")
            }
            guard compactionMinDeadBytes >= 0 else { throw refuse("compactionMinDeadBytes", compactionMinDeadBytes, "0 or more bytes") }
            guard idleCompactionDelay.isFinite, idleCompactionDelay >= 0 else {
                throw refuse("idleCompactionDelay", idleCompactionDelay, "0 (off) or more seconds")
            }
            guard dictionaries.trainingSampleBytes > 0 else {
                throw refuse("dictionaries.trainingSampleBytes", dictionaries.trainingSampleBytes, "more than 0 bytes")
            }
            if let cache = objects.cache {
                if let entries = cache.maxEntries, entries <= 0 { throw refuse("objects.cache.maxEntries", entries, "more than 0") }
                if let bytes = cache.maxBytes, bytes <= 0 { throw refuse("objects.cache.maxBytes", bytes, "more than 0") }
            }
        }
    }
}
