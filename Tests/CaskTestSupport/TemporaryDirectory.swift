import Foundation
import Synchronization

/// A fresh directory under the system temporary directory, removed when `remove()` is called
/// (tests call it in `defer`/`tearDown`). Set `CASK_KEEP_TEST_DIRS=1` to keep them for inspection.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    /// `base`: where to create it, instead of `TMPDIR` (or `/tmp`).
    public init(_ label: String = "cask-test", base: String? = nil) {
        let base = base ?? ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        path = base + "/" + label + "-" + UUID().uuidString.prefix(8).lowercased()
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// A path inside the directory (not created).
    public func appending(_ name: String) -> String { path + "/" + name }

    /// Leaves the directory in place from now on (for a failure to inspect).
    public func keep() { kept.withLock { $0 = true } }

    private let kept = Mutex(false)

    public func remove() {
        if ProcessInfo.processInfo.environment["CASK_KEEP_TEST_DIRS"] == nil && !kept.withLock({ $0 }) {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    deinit { remove() }
}
