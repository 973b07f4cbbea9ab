import Cask

/// Store options that several test files open their stores with.
extension CaskStore.Options {
    /// The default options, read-only (a read-only open never creates the directory: a missing one
    /// is ``CaskError/directoryMissing(path:)``).
    package static var readOnly: Self { Self(durability: .os, readOnly: true) }

    /// `.os`, 8 KiB segments, no hint files: how the torn-write and corruption tests open the stores
    /// they damage, once per case. Nothing writes a hint on close, so the loops stay fast and each
    /// open scans every segment (the hint path has its own checks).
    package static func smallSegmentsWithoutHints(readOnly: Bool = false) -> Self {
        var options = Self(durability: .os, readOnly: readOnly)
        options.maxSegmentSize = 8 << 10
        options.writeHints = false
        return options
    }

    /// Automatic compaction off, so that a store compacts only when the test says so; with
    /// `maxSegmentSize` (default 64 MiB) and, when given, `fileSystem` in place of the real one.
    package static func manualCompaction(
        _ durability: Durability = .os, maxSegmentSize: Int64? = nil, fileSystem: (any FileSystem)? = nil
    ) -> Self {
        var options = Self(durability: durability)
        options.automaticCompaction = false
        if let maxSegmentSize { options.maxSegmentSize = maxSegmentSize }
        if let fileSystem { options.fileSystem = fileSystem }
        return options
    }
}
