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
    /// Whether both buffers hold the same bytes: one `memcmp`, not a byte-by-byte loop.
    @inline(__always)
    package func hasSameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0 else { return true }
        return memcmp(baseAddress!, other.baseAddress!, count) == 0
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
