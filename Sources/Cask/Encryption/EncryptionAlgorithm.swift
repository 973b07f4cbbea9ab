import CSodium

/// The authenticated cipher an encrypted store seals its files with, chosen when the store is
/// created and kept in its `ENCRYPTION` file (FORMAT.md, "Encryption"). Both take a 32-byte key
/// and give a 16-byte tag; each file of the store gets a key of its own, derived from the store's
/// key and a random salt in the file's header (``FileCipher``).
public enum EncryptionAlgorithm: UInt16, Sendable, CaseIterable, CustomStringConvertible {
    /// AES-256-GCM: about 2.5× faster than ChaCha20-Poly1305 on small records, but libsodium runs it
    /// only on x86-64 CPUs with AES-NI and carry-less multiplication (every x86-64 server CPU since
    /// 2010). A store sealed with it cannot be opened on a CPU without them.
    case aes256gcm = 1
    /// XChaCha20-Poly1305 (as libsodium's `crypto_aead_xchacha20poly1305_ietf`): runs on every CPU.
    case xchacha20poly1305 = 2

    /// What a new store uses when ``Encryption/key(_:algorithm:)`` names none: AES-256-GCM where this
    /// CPU runs it, XChaCha20-Poly1305 elsewhere.
    public static var preferred: EncryptionAlgorithm {
        Sodium.ready && crypto_aead_aes256gcm_is_available() == 1 ? .aes256gcm : .xchacha20poly1305
    }

    /// Whether this process can seal and open with it.
    public var isAvailable: Bool {
        switch self {
        case .aes256gcm: Sodium.ready && crypto_aead_aes256gcm_is_available() == 1
        case .xchacha20poly1305: Sodium.ready
        }
    }

    public var description: String {
        switch self {
        case .aes256gcm: "AES-256-GCM"
        case .xchacha20poly1305: "XChaCha20-Poly1305"
        }
    }
}

/// libsodium, initialised once per process (`sodium_init`, which picks the CPU's fastest code).
enum Sodium {
    static let ready: Bool = sodium_init() >= 0
}
