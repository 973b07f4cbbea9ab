import CSodium

/// The authenticated cipher of one file of an encrypted store, keyed for that file alone: its key is
/// `HChaCha20(store key, salt)`, the salt being 16 random bytes in the file's header, and each
/// message it seals has a number of its own in the file (a record's offset, a hint block's index), its
/// nonce being `00 00 00 00` followed by that number as a u64, little-endian (FORMAT.md, "Encryption").
///
/// With ``EncryptionAlgorithm/xchacha20poly1305`` this is exactly XChaCha20-Poly1305 under the store's
/// key with the 24-byte nonce `salt ‖ LE64(number)` (libsodium's XChaCha derives the same key and
/// nonce); the key is derived once per file here rather than once per message.
///
/// The fence around libsodium: every call into it is in this type and ``EncryptionKey``. Immutable
/// after init and `Sendable`: any number of threads may seal and open at once. A message is sealed
/// in place; it is opened into a buffer of the caller's (which may be the ciphertext itself).
package final class FileCipher: @unchecked Sendable {
    /// Bytes of the tag that follows every sealed message.
    package static let tagLength = 16
    /// Bytes of a salt.
    package static let saltLength = 16

    package let algorithm: EncryptionAlgorithm
    /// The salt the file's key was derived with (not secret: it is in the file's header).
    package let salt: [UInt8]
    /// For tests only: called with every message sealed, before it is sealed — the salt, the number,
    /// and a fingerprint of the message and its associated data — so that a test can show that no
    /// (salt, number) is ever sealed with two different messages. Set it before any store opens and
    /// clear it after they all close; it must be thread-safe.
    nonisolated(unsafe) package static var sealObserver: (@Sendable (_ salt: [UInt8], _ number: UInt64, _ fingerprint: UInt64) -> Void)?
    /// AES-256-GCM: libsodium's expanded key state (512 bytes, 16-aligned); ChaCha20-Poly1305: the
    /// 32-byte key.
    private let state: UnsafeMutableRawPointer
    private let stateLength: Int

    /// The cipher for the file whose header holds `salt`, under the store key `key`.
    /// The algorithm must be available (``EncryptionAlgorithm/isAvailable``).
    init(algorithm: EncryptionAlgorithm, key: KeyBytes, salt: UnsafeRawBufferPointer) {
        precondition(salt.count == Self.saltLength && algorithm.isAvailable)
        self.algorithm = algorithm
        self.salt = Array(salt)
        var subkey = [UInt8](repeating: 0, count: 32)
        defer { subkey.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, 32) } }
        subkey.withUnsafeMutableBytes { out in
            key.withBytes { key in
                _ = crypto_core_hchacha20(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), salt.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    key.baseAddress!.assumingMemoryBound(to: UInt8.self), nil)
            }
        }
        switch algorithm {
        case .aes256gcm:
            stateLength = crypto_aead_aes256gcm_statebytes()
            state = UnsafeMutableRawPointer.allocate(byteCount: stateLength, alignment: 16)
            subkey.withUnsafeBytes { subkey in
                _ = crypto_aead_aes256gcm_beforenm(
                    state.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self), subkey.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        case .xchacha20poly1305:
            stateLength = 32
            state = UnsafeMutableRawPointer.allocate(byteCount: stateLength, alignment: 16)
            subkey.withUnsafeBytes { state.copyMemory(from: $0.baseAddress!, byteCount: 32) }
        }
    }

    deinit {
        sodium_memzero(state, stateLength)
        state.deallocate()
    }

    /// Where an empty message is: libsodium is never handed a null pointer. Never read or written.
    nonisolated(unsafe) private static let nowhere = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)

    /// The 12-byte nonce of message `number` (its first 12 bytes; 16 are stored).
    @inline(__always)
    private static func nonce(_ number: UInt64) -> (UInt64, UInt64) {
        // Little-endian: bytes 0 ..< 4 zero, 4 ..< 12 the number.
        ((number << 32).littleEndian, (number >> 32).littleEndian)
    }

    /// Encrypts `message` in place as message `number` of the file, authenticating it and
    /// `associatedData` too, and stores the tag at `tag` (``tagLength`` bytes). Each `number` must
    /// be sealed at most once with different content (the callers' numbering rules, FORMAT.md).
    @inline(__always)
    package func seal(_ message: UnsafeMutableRawBufferPointer, associatedData: UnsafeRawBufferPointer, number: UInt64, tag: UnsafeMutableRawPointer) {
        if let observer = Self.sealObserver {
            let fingerprint = UInt64(CRC32C.checksum(of: UnsafeRawBufferPointer(message))) << 32 | UInt64(CRC32C.checksum(of: associatedData))
            observer(salt, number, fingerprint ^ UInt64(message.count) &* 0x9E37_79B9)
        }
        #if FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        // Fuzzing builds (Tools/fuzz.sh) seal nothing and open anything, as they checksum nothing:
        // mutated inputs then reach the parsers behind the tags (hint entries, dictionary content,
        // a batch commit's value). Their seed corpus is written by the same build.
        tag.initializeMemory(as: UInt8.self, repeating: 0, count: Self.tagLength)
        return
        #endif
        var nonce = Self.nonce(number)
        withUnsafeBytes(of: &nonce) { nonce in
            let n = nonce.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let m = (message.baseAddress ?? Self.nowhere).assumingMemoryBound(to: UInt8.self)
            let ad = associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self)
            let mac = tag.assumingMemoryBound(to: UInt8.self)
            switch algorithm {
            case .aes256gcm:
                _ = crypto_aead_aes256gcm_encrypt_detached_afternm(
                    m, mac, nil, m, UInt64(message.count), ad, UInt64(associatedData.count), nil, n,
                    state.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
            case .xchacha20poly1305:
                _ = crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                    m, mac, nil, m, UInt64(message.count), ad, UInt64(associatedData.count), nil, n, state.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// Checks the tag of message `number` (`ciphertext`, then `tag`) with `associatedData` and, when it
    /// holds, decrypts the message into `plaintext` (at least `ciphertext.count` bytes; it may be the
    /// ciphertext's own memory). Returns whether the tag held; when it did not, `plaintext` holds
    /// nothing to use (a forged, damaged or misplaced message, or another key).
    @inline(__always)
    package func open(
        _ ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawPointer, associatedData: UnsafeRawBufferPointer, number: UInt64,
        into plaintext: UnsafeMutableRawPointer?
    ) -> Bool {
        #if FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        if let plaintext, let source = ciphertext.baseAddress, plaintext != UnsafeMutableRawPointer(mutating: source) {
            plaintext.copyMemory(from: source, byteCount: ciphertext.count)
        }
        return true
        #endif
        var nonce = Self.nonce(number)
        return withUnsafeBytes(of: &nonce) { nonce in
            let n = nonce.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let c = UnsafeRawPointer(ciphertext.baseAddress ?? UnsafeRawPointer(Self.nowhere)).assumingMemoryBound(to: UInt8.self)
            let m = (plaintext ?? Self.nowhere).assumingMemoryBound(to: UInt8.self)
            let ad = associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self)
            let mac = tag.assumingMemoryBound(to: UInt8.self)
            switch algorithm {
            case .aes256gcm:
                return crypto_aead_aes256gcm_decrypt_detached_afternm(
                    m, nil, c, UInt64(ciphertext.count), mac, ad, UInt64(associatedData.count), n,
                    state.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self)) == 0
            case .xchacha20poly1305:
                return crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                    m, nil, c, UInt64(ciphertext.count), mac, ad, UInt64(associatedData.count), n, state.assumingMemoryBound(to: UInt8.self)) == 0
            }
        }
    }

    /// The tag that authenticates `associatedData` alone as message `number` (an empty message): how
    /// headers are authenticated.
    package func tag(authenticating associatedData: UnsafeRawBufferPointer, number: UInt64) -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: Self.tagLength)
        var empty: UInt64 = 0  // a message of no bytes, at an address (libsodium is not asked to take a null one)
        tag.withUnsafeMutableBytes { tag in
            withUnsafeMutableBytes(of: &empty) { empty in
                seal(UnsafeMutableRawBufferPointer(rebasing: empty[0..<0]), associatedData: associatedData, number: number, tag: tag.baseAddress!)
            }
        }
        return tag
    }

    /// Whether `tag` authenticates `associatedData` alone as message `number`.
    package func verify(tag: UnsafeRawBufferPointer, authenticating associatedData: UnsafeRawBufferPointer, number: UInt64) -> Bool {
        precondition(tag.count == Self.tagLength)
        var empty: UInt64 = 0
        return withUnsafeMutableBytes(of: &empty) { empty in
            open(UnsafeRawBufferPointer(rebasing: empty[0..<0]), tag: tag.baseAddress!, associatedData: associatedData, number: number,
                 into: empty.baseAddress!)
        }
    }

    /// 16 random bytes from the operating system's generator: a new file's salt.
    package static func randomSalt() -> [UInt8] {
        var salt = [UInt8](repeating: 0, count: saltLength)
        salt.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, saltLength) }
        return salt
    }
}
