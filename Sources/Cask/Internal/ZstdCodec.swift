import CZstd

/// Zstandard frames of whole buffers, over the system `libzstd`: what hint file blocks are stored
/// as (FORMAT.md, "Hint files", codec 2). Records are LZ4 blocks; zstd's entropy coding pays where
/// many small, similar entries sit side by side.
///
/// A compressor owns one compression context and reuses it for every call. Not thread-safe: one
/// hint encoder owns one.
package final class ZstdCompressor {
    /// Level 1: on fillrandom's hint entries about 0.6 of LZ4's output, at a few ms per MiB.
    static let level: Int32 = 1
    private let context: OpaquePointer

    package init() {
        guard let context = ZSTD_createCCtx() else { fatalError("ZSTD_createCCtx: out of memory") }
        self.context = context
    }

    deinit { ZSTD_freeCCtx(context) }

    /// The largest frame `compress` can produce for `count` input bytes.
    package static func bound(_ count: Int) -> Int { ZSTD_compressBound(count) }

    /// Compresses `source` (1 byte or more) into `destination` as one frame that states its content
    /// size and names no dictionary. Returns the frame's size, or `nil` when it does not fit.
    package func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard let input = source.baseAddress, source.count > 0, let output = destination.baseAddress, destination.count > 0 else { return nil }
        let written = ZSTD_compressCCtx(context, output, destination.count, input, source.count, Self.level)
        return ZSTD_isError(written) == 0 ? written : nil
    }
}

package enum ZstdDecompressor {
    /// Decompresses `source`, which must be exactly one zstd frame — no bytes after it — that states
    /// its content size as `destination.count`, names no dictionary, and expands to exactly that
    /// many bytes. Returns `false` otherwise; never writes outside `destination`.
    package static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        guard let input = source.baseAddress, source.count > 0, let output = destination.baseAddress, destination.count > 0
        else { return false }
        guard ZSTD_getFrameContentSize(input, source.count) == UInt64(destination.count),
              ZSTD_findFrameCompressedSize(input, source.count) == source.count,
              ZSTD_getDictID_fromFrame(input, source.count) == 0
        else { return false }
        let produced = ZSTD_decompress(output, destination.count, input, source.count)
        return ZSTD_isError(produced) == 0 && produced == destination.count
    }
}
