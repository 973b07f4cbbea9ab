/// An encrypted store's key, as its files are sealed and opened with it: the store's key, the
/// algorithm and the store's id (both from its `ENCRYPTION` file), and a ``FileCipher`` for each
/// file's salt. Immutable and `Sendable`; one per open store, shared by its readers and writers.
///
/// The store id is random, chosen when the store is created; every segment header and dictionary
/// file authenticates it, so that a file of another store is refused even under the same key.
package final class StoreEncryption: Sendable {
    package let algorithm: EncryptionAlgorithm
    /// 16 random bytes naming the store (``EncryptionFile``).
    package let storeID: [UInt8]
    /// The store's `ENCRYPTION` file, as a backup copies it (it never changes).
    package let identityFile: [UInt8]
    let key: KeyBytes

    package init(key: EncryptionKey, algorithm: EncryptionAlgorithm, storeID: [UInt8], identityFile: [UInt8]) {
        precondition(storeID.count == EncryptionFile.storeIDLength)
        self.key = key.storage
        self.algorithm = algorithm
        self.storeID = storeID
        self.identityFile = identityFile
    }

    /// The cipher of the file whose header holds `salt`.
    package func cipher(salt: UnsafeRawBufferPointer) -> FileCipher {
        FileCipher(algorithm: algorithm, key: key, salt: salt)
    }

    package func cipher(salt: [UInt8]) -> FileCipher {
        salt.withUnsafeBytes { cipher(salt: $0) }
    }

    /// A fresh random salt and its cipher, for a new file (a segment, hint or dictionary; a repaired
    /// segment written again): a new file never seals a message under a key another file used.
    package func newCipher() -> (salt: [UInt8], cipher: FileCipher) {
        let salt = FileCipher.randomSalt()
        return (salt, cipher(salt: salt))
    }
}
