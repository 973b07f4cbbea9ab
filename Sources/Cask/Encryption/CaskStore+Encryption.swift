extension CaskStore {
    /// The algorithm the store's files are sealed with, as its `ENCRYPTION` file names it (checked
    /// against the key the store was opened with); nil: the store is not encrypted. Fixed for the
    /// life of the open store (``rekey(at:from:to:progress:)`` changes it by making a new store).
    /// Reads nothing: O(1), from any thread.
    public var encryptionAlgorithm: EncryptionAlgorithm? { encryption?.algorithm }
}
