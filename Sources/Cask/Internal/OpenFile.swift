/// A descriptor opened through a ``FileSystem``, closed through that same file system exactly once:
/// when the value goes away (`deinit`), or earlier by ``close()``. Noncopyable, so that no second
/// owner can close it again or use it after the close.
///
/// A value that is never consumed lives to the end of its scope (a noncopyable value with a `deinit`
/// is not destroyed at its last use), so a descriptor borrowed from it with ``descriptor`` — given to
/// a ``SegmentReader``, say — stays open until then. Where the order of the close matters (before a
/// `rename` or an `unlink`, or where a path that throws must close before what it does next), call
/// ``close()`` at that point rather than leave it to the end of the scope.
///
/// When ownership of the descriptor moves to a long-lived object (a ``SegmentFile``, which closes
/// it in its own `deinit`), ``take()`` hands the raw descriptor over without closing it.
package struct OpenFile: ~Copyable, Sendable {
    /// The open descriptor; `-1` once ``take()`` handed it over (nothing to close then).
    private var raw: Int32
    private let fileSystem: any FileSystem

    /// Takes ownership of `descriptor`, open through `fileSystem`.
    package init(descriptor: Int32, fileSystem: any FileSystem) {
        raw = descriptor
        self.fileSystem = fileSystem
    }

    /// The raw descriptor, for the calls of the ``FileSystem`` seam. Valid while this value lives:
    /// do not close it, nor keep it past the value's scope.
    package var descriptor: Int32 { raw }

    /// Closes the descriptor now.
    package consuming func close() {}  // The deinit, which runs as `self` is consumed here, closes.

    /// Hands the raw descriptor over to a new owner, which must close it; this value closes nothing.
    package consuming func take() -> Int32 {
        let descriptor = raw
        raw = -1  // `discard self` is not allowed with a stored existential; the deinit sees -1.
        return descriptor
    }

    deinit {
        if raw >= 0 { fileSystem.close(raw) }
    }
}

extension FileSystem {
    /// ``open(_:flags:mode:)``, returning a descriptor that closes itself (see ``OpenFile``).
    package func openFile(_ path: String, flags: Int32, mode: UInt32) throws(Errno) -> OpenFile {
        OpenFile(descriptor: try open(path, flags: flags, mode: mode), fileSystem: self)
    }
}
