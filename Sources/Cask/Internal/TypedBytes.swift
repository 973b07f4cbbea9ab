/// Typed-throws forms of the standard library's `withUnsafe…Bytes`, whose `rethrows` would widen
/// every error to `any Error`. The pointer must not escape `body`.
extension Array where Element == UInt8 {
    @inlinable
    package func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        do { return try withUnsafeBytes(body) } catch { throw error as! E }
    }

    @inline(__always)
    package mutating func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        do { return try withUnsafeMutableBytes(body) } catch { throw error as! E }
    }
}

extension ArraySlice where Element == UInt8 {
    @inlinable
    package func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        do { return try withUnsafeBytes(body) } catch { throw error as! E }
    }
}

/// A scratch buffer of `byteCount` bytes (on the stack when small) for the duration of `body`.
@inline(__always)
package func withScratchBytes<R, E: Error>(_ byteCount: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
    try withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 16, body)
}

extension UnsafeRawBufferPointer {
    /// Whether both buffers hold the same bytes. Keys of 8 to 16 bytes (the common ones) are
    /// compared as two overlapping words in line, longer ones with one `memcmp`, never byte by byte.
    @inline(__always)
    package func hasSameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0, let base = baseAddress, let otherBase = other.baseAddress else { return true }
        if count >= 8 && count <= 16 {
            let last = count &- 8  // Safe: count >= 8.
            return base.loadUnaligned(as: UInt64.self) == otherBase.loadUnaligned(as: UInt64.self)
                && base.loadUnaligned(fromByteOffset: last, as: UInt64.self) == otherBase.loadUnaligned(fromByteOffset: last, as: UInt64.self)
        }
        return memcmp(base, otherBase, count) == 0
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
