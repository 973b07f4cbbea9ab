#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A POSIX error number, as a value you can match:
/// `catch CaskError.io(_, _, .noSpace)` or `if errno == .interrupted`.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let ioError = Errno(rawValue: EIO)
    public static let noEntry = Errno(rawValue: ENOENT)
    public static let exists = Errno(rawValue: EEXIST)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    public static let quotaExceeded = Errno(rawValue: EDQUOT)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// The last component of a path is a symbolic link, which Cask does not follow inside a store
    /// (what `open` with `O_NOFOLLOW` reports).
    public static let symbolicLink = Errno(rawValue: ELOOP)
    /// A file to write has more than one name (hard link); Cask writes only files of its own.
    public static let hardLinked = Errno(rawValue: EMLINK)
    /// Not an operating-system error number: the path names a directory, FIFO, socket or device
    /// where Cask opens only regular files.
    public static let notRegularFile = Errno(rawValue: -1)

    /// The last error of the calling thread.
    static var current: Errno { Errno(rawValue: errno) }

    public var description: String {
        if self == .notRegularFile { return "not a regular file (a directory, FIFO, socket or device)" }
        guard let text = strerror(rawValue) else { return "errno \(rawValue)" }
        return "\(String(cString: text)) (errno \(rawValue))"
    }

    public static func ~= (pattern: Errno, value: any Error) -> Bool {
        (value as? Errno) == pattern
    }
}
