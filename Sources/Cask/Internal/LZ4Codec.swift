import CLZ4

/// LZ4 block compression of single values, over the system `liblz4`.
///
/// A compressor owns one LZ4 stream state (about 16 KiB) and reuses it for every call, resetting it
/// with `LZ4_resetStream_fast` so each value is an independent block without re-clearing the table.
/// Not thread-safe: the store's writer owns one, under its lock.
package final class LZ4Compressor {
    private let stream: UnsafeMutablePointer<LZ4_stream_t>

    package init() {
        stream = UnsafeMutablePointer<LZ4_stream_t>.allocate(capacity: 1)
        LZ4_initStream(stream, MemoryLayout<LZ4_stream_t>.size)
    }

    deinit { stream.deallocate() }

    /// The largest output `compress` can produce for `count` input bytes.
    package static func bound(_ count: Int) -> Int { Int(LZ4_compressBound(Int32(count))) }

    /// Compresses `source` into `destination` as one independent LZ4 block.
    /// Returns the compressed size, or `nil` when it does not fit in `destination`.
    package func compress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard source.count > 0, destination.count > 0 else { return nil }
        LZ4_resetStream_fast(stream)
        let written = LZ4_compress_fast_continue(
            stream,
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            destination.baseAddress!.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count), 1)
        return written > 0 ? Int(written) : nil
    }
}

package enum LZ4Decompressor {
    /// Decompresses one LZ4 block that must expand to exactly `destination.count` bytes.
    /// Returns `false` for malformed input or a size mismatch; never reads or writes out of bounds.
    package static func decompress(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Bool {
        guard let src = source.baseAddress, source.count > 0 else { return destination.count == 0 }
        guard let dst = destination.baseAddress else { return false }
        let produced = LZ4_decompress_safe(
            src.assumingMemoryBound(to: CChar.self),
            dst.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count))
        // liblz4 takes a match offset of 0, which the block format does not allow (FORMAT.md, "LZ4").
        return produced == Int32(destination.count) && !LZ4BlockExpander.hasZeroMatchOffset(source)
    }
}
