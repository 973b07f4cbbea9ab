/// When a write is safe from a crash. Chosen per store in ``CaskStore/Options``.
public enum Durability: String, Sendable, CaseIterable {
    /// Writes collect in an in-memory buffer and reach the OS when it fills
    /// (``CaskStore/Options/bufferSize``), every ``CaskStore/Options/flushInterval``, and on
    /// `sync()` and `close()`. Fastest; a process crash can lose the unflushed tail (never more,
    /// and never a torn record: recovery cuts it).
    case buffered
    /// Every write is handed to the kernel before it returns (stored into the page cache through
    /// the segment's shared mapping, or with `pwrite`): it survives the process being killed
    /// (`kill -9`), not a power cut or kernel crash. The default.
    case os
    /// Every write is on stable storage (`fdatasync`) before it returns. Concurrent writers share
    /// one `fdatasync` (group commit), so throughput grows with the number of writers.
    case fsync
}
