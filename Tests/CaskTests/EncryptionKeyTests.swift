import CSodium
import Foundation
import XCTest
@testable import Cask
import CaskTestSupport

/// Keys and key files, and the file cipher against libsodium's own constructions: ChaCha20-Poly1305
/// under HChaCha20(key, salt) with nonce `0000 ‖ u64(n)` is XChaCha20-Poly1305 with nonce
/// `salt ‖ u64(n)` (FORMAT.md, "Encryption"), and AES-256-GCM is libsodium's under the derived key.
final class EncryptionKeyTests: XCTestCase {
    func testKeyFiles() throws {
        let directory = TemporaryDirectory("cask-keys")
        defer { directory.remove() }
        let key = EncryptionKey.random()
        XCTAssertNotEqual(key, EncryptionKey.random())
        let hex = key.hexKeyFile
        XCTAssertEqual(hex.count, 65)
        XCTAssertTrue(hex.hasSuffix("\n"))
        func file(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = directory.appending(name)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        XCTAssertEqual(try EncryptionKey(keyFile: file("hex", Array(hex.utf8))), key)
        XCTAssertEqual(try EncryptionKey(keyFile: file("upper", Array(hex.uppercased().utf8))), key)
        XCTAssertEqual(try EncryptionKey(keyFile: file("bare", Array(hex.dropLast().utf8))), key)
        XCTAssertEqual(try EncryptionKey(keyFile: file("crlf", Array(hex.dropLast().utf8) + [13, 10])), key)
        let raw = Array(0..<32).map { UInt8($0 * 7) }
        XCTAssertEqual(try EncryptionKey(keyFile: file("raw", raw)), try EncryptionKey(raw))
        for (name, bytes) in [
            ("short", Array(hex.utf8.prefix(40))), ("odd", Array(hex.utf8.dropLast(2)) + [10]), ("not-hex", Array(repeating: UInt8(ascii: "g"), count: 64)),
            ("two-newlines", Array(hex.utf8) + [10]), ("raw-short", Array(raw.prefix(31))), ("empty", []),
        ] {
            XCTAssertThrowsError(try EncryptionKey(keyFile: file(name, bytes)), name) { error in
                guard case .invalidEncryptionKey(let reason)? = error as? CaskError else { return XCTFail("\(name): \(error)") }
                XCTAssertTrue(reason.hasPrefix("key file \(directory.appending(name)) holds \(bytes.count) bytes"), reason)
            }
        }
        // Never through a link, never a missing file quietly.
        try FileManager.default.createSymbolicLink(atPath: directory.appending("link"), withDestinationPath: directory.appending("hex"))
        XCTAssertThrowsError(try EncryptionKey(keyFile: directory.appending("link"))) { error in
            XCTAssertEqual(error as? CaskError, .foreignFile(path: directory.appending("link"), errno: .symbolicLink))
        }
        XCTAssertThrowsError(try EncryptionKey(keyFile: directory.appending("missing")))
        XCTAssertThrowsError(try EncryptionKey([UInt8](repeating: 0, count: 33))) { error in
            XCTAssertEqual(error as? CaskError, .invalidEncryptionKey(reason: "a key is 32 bytes, this one is 33"))
        }
    }

    func testTheFileCipherIsXChaCha20Poly1305AndAES256GCMUnderTheDerivedKey() throws {
        let key = EncryptionTests.key
        var random = SeededGenerator(seed: 26)
        for algorithm in EncryptionAlgorithm.allCases where algorithm.isAvailable {
            for length in [0, 1, 15, 16, 17, 70, 128, 1000] {
                let salt = random.bytes(16), message = random.bytes(length), associated = random.bytes(12)
                let number = UInt64.random(in: 0...UInt64(UInt32.max) * 4, using: &random)
                let cipher = FileCipher(algorithm: algorithm, key: key.storage, salt: salt.withUnsafeBytes { $0 })
                var sealed = message
                var tag = [UInt8](repeating: 0, count: 16)
                sealed.withUnsafeMutableBytes { m in
                    associated.withUnsafeBytes { ad in tag.withUnsafeMutableBytes { cipher.seal(m, associatedData: ad, number: number, tag: $0.baseAddress!) } }
                }
                // libsodium's own construction, from the key, the salt and the number.
                var expected = [UInt8](repeating: 0, count: length + 16)
                var clen: UInt64 = 0
                let nonce24 = salt + withUnsafeBytes(of: number.littleEndian) { Array($0) }
                key.storage.withBytes { k in
                    switch algorithm {
                    case .xchacha20poly1305:
                        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                            &expected, &clen, message, UInt64(length), associated, UInt64(associated.count), nil, nonce24,
                            k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    case .aes256gcm:
                        var subkey = [UInt8](repeating: 0, count: 32)
                        _ = crypto_core_hchacha20(&subkey, salt, k.baseAddress!.assumingMemoryBound(to: UInt8.self), nil)
                        let nonce12 = [0, 0, 0, 0] + withUnsafeBytes(of: number.littleEndian) { Array($0) }
                        _ = crypto_aead_aes256gcm_encrypt(&expected, &clen, message, UInt64(length), associated, UInt64(associated.count), nil, nonce12, subkey)
                    }
                }
                XCTAssertEqual(sealed + tag, expected, "\(algorithm), \(length) bytes")
                // And it opens again, and not as another number, with other associated data or a changed tag.
                var opened = [UInt8](repeating: 0, count: max(length, 1))
                func opens(_ n: UInt64, _ ad: [UInt8], _ t: [UInt8]) -> Bool {
                    sealed.withUnsafeBytes { c in
                        ad.withUnsafeBytes { a in
                            t.withUnsafeBytes { tt in opened.withUnsafeMutableBytes { cipher.open(c, tag: tt.baseAddress!, associatedData: a, number: n, into: $0.baseAddress!) } }
                        }
                    }
                }
                XCTAssertTrue(opens(number, associated, tag))
                XCTAssertEqual(Array(opened.prefix(length)), message)
                XCTAssertFalse(opens(number &+ 1, associated, tag))
                XCTAssertFalse(opens(number, associated.reversed(), tag))
                var bent = tag
                bent[5] ^= 1
                XCTAssertFalse(opens(number, associated, bent))
            }
        }
    }
}
