/// A hint file that a reader does not use, named the same way by the open
/// (``RecoveryReport/invalidHints``) and ``CaskStore/verify(at:progress:)``
/// (``VerificationReport/invalidHints``). A hint file only saves reading its segment, so the
/// segment is read instead: nothing is lost, but the open is slower until a writable open or
/// `cask recover` writes it again.
public struct InvalidHint: Sendable, Equatable, CustomStringConvertible {
    /// The hint file's path.
    public var file: String
    /// The id of the segment it is named for (which may not exist).
    public var segmentID: UInt64
    /// Why, in a sentence.
    public var reason: String

    public init(file: String, segmentID: UInt64, reason: String) {
        self.file = file
        self.segmentID = segmentID
        self.reason = reason
    }

    public var description: String { "\(file): \(reason)" }
}
