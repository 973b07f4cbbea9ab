import Foundation

/// Creates `path` (and its parents), mode 0700, as the peers expect their directory to exist.
func makeDirectory(_ path: String) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
}

/// The current `errno` as text.
func errnoText() -> String { String(cString: strerror(errno)) }
