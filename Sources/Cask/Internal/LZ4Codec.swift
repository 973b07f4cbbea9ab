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

    /// Compresses `source` into `destination` as one independent LZ4 block; with a `dictionary`, one
    /// that refers back into its content, so that it expands only with the same dictionary
    /// (``LZ4Decompressor/decompress(_:into:dictionary:)``). Returns the compressed size, or `nil`
    /// when it does not fit in `destination`.
    package func compress(
        _ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, dictionary: LZ4Dictionary? = nil
    ) -> Int? {
        guard source.count > 0, destination.count > 0 else { return nil }
        LZ4_resetStream_fast(stream)
        if let dictionary { cask_lz4_attach_dictionary(stream, dictionary.loadedStream) }
        let written = LZ4_compress_fast_continue(
            stream,
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            destination.baseAddress!.assumingMemoryBound(to: CChar.self),
            Int32(source.count), Int32(destination.count), 1)
        return written > 0 ? Int(written) : nil
    }
}

/// A dictionary's content in memory that never moves, and an LZ4 stream state with the content
/// loaded (`LZ4_loadDict`) that compressors attach by reference. Immutable after init, so it may be shared by
/// any number of threads; the content stays valid as long as the object lives.
package final class LZ4Dictionary: @unchecked Sendable {
    /// The content: at most 64 KiB (LZ4 refers back no further).
    package let content: UnsafeRawBufferPointer
    fileprivate let loadedStream: UnsafeMutablePointer<LZ4_stream_t>

    /// Copies `content` (1 ... 65,536 bytes).
    package init(content source: UnsafeRawBufferPointer) {
        precondition(source.count > 0 && source.count <= 65_536, "an LZ4 dictionary holds 1 ... 64 KiB")
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: source.count, alignment: 16)
        copy.copyMemory(from: source)
        content = UnsafeRawBufferPointer(copy)
        loadedStream = UnsafeMutablePointer<LZ4_stream_t>.allocate(capacity: 1)
        LZ4_initStream(loadedStream, MemoryLayout<LZ4_stream_t>.size)
        LZ4_loadDict(loadedStream, content.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(content.count))
    }

    deinit {
        loadedStream.deallocate()
        content.deallocate()
    }
}

package enum LZ4Decompressor {
    /// Decompresses one LZ4 block that must expand to exactly `destination.count` bytes; with a
    /// `dictionary` (the content a block was compressed against), matches may reach back into it,
    /// the same rules holding otherwise. Returns `false` for malformed input or a size mismatch;
    /// never reads or writes out of bounds.
    package static func decompress(
        _ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer, dictionary: UnsafeRawBufferPointer? = nil
    ) -> Bool {
        guard let src = source.baseAddress, source.count > 0 else { return destination.count == 0 }
        guard let dst = destination.baseAddress else { return false }
        let input = src.assumingMemoryBound(to: CChar.self), output = dst.assumingMemoryBound(to: CChar.self)
        let produced: Int32
        if let dictionary {
            guard let dict = dictionary.baseAddress else { return false }
            produced = LZ4_decompress_safe_usingDict(
                input, output, Int32(source.count), Int32(destination.count), dict.assumingMemoryBound(to: CChar.self), Int32(dictionary.count))
        } else {
            produced = LZ4_decompress_safe(input, output, Int32(source.count), Int32(destination.count))
        }
        // liblz4 takes a match offset of 0, which the block format does not allow (FORMAT.md, "LZ4").
        return produced == Int32(destination.count) && !LZ4BlockExpander.hasZeroMatchOffset(source)
    }
}
