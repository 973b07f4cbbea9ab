extension CaskStore {
    /// What ``CaskStore/rekey(at:from:to:progress:)`` did.
    public struct RekeyReport: Sendable, Equatable {
        /// The store's directory (its path with links followed).
        public var directory: String
        /// The entries copied: every key the store held, with its value and expiry.
        public var keys = 0
        /// Bytes of the store's segment files before and after (hints, dictionaries and the
        /// `ENCRYPTION` file besides).
        public var bytesBefore: Int64 = 0
        public var bytesAfter: Int64 = 0
        /// The algorithm the store is sealed with now; nil: it is not encrypted.
        public var algorithm: EncryptionAlgorithm?
        /// The directory that holds what is left of the store as it was, when it could not be removed
        /// whole: it held files that are not Cask's (they are there, untouched). Nil once removed.
        public var leftBehind: String?
        /// Torn tails the open of the store cut before copying (``RecoveryReport/truncations``):
        /// bytes after its last valid record that a write which did not finish left.
        public var truncations: [RecoveryReport.Truncation] = []

        public init(directory: String) { self.directory = directory }
    }
}
