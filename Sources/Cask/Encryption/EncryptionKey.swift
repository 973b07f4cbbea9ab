import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// A store's 32-byte encryption key (``Encryption/key(_:algorithm:)``). The bytes are held in memory
/// of their own, wiped when the last copy of the key is released; Cask never writes them anywhere.
public struct EncryptionKey: Sendable, Equatable {
    /// The length of every key: 32 bytes (256 bits).
    public static let length = 32

    let storage: KeyBytes

    /// A key from its 32 bytes. Throws ``CaskError/invalidEncryptionKey(reason:)`` for any other length.
    public init(_ bytes: some Collection<UInt8>) throws(CaskError) {
        guard bytes.count == Self.length else {
            throw CaskError.invalidEncryptionKey(reason: "a key is \(Self.length) bytes, this one is \(bytes.count)")
        }
        storage = KeyBytes(Array(bytes))
    }

    /// A new random key, from the operating system's generator (`getrandom`).
    public static func random() -> EncryptionKey {
        precondition(Sodium.ready, "libsodium failed to initialise")
        var bytes = [UInt8](repeating: 0, count: length)
        bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, length) }
        defer { bytes.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, length) } }
        return try! EncryptionKey(bytes)
    }

    /// The key a key file holds: exactly 32 bytes, or 64 hexadecimal digits (either case) and at
    /// most one newline after them. Anything else is refused with the reason, naming the file; the
    /// file is opened like a store's files (never through a link, only a regular file).
    public init(keyFile path: String) throws(CaskError) {
        let fileSystem = PosixFileSystem()
        let file: OpenFile
        do { file = try fileSystem.openFile(path, flags: O_RDONLY, mode: 0) } catch {
            throw CaskError.from(error, operation: "open key file", path: path, reading: true)
        }
        var bytes = [UInt8](repeating: 0, count: 130)
        defer { bytes.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) } }
        let count: Int
        do { count = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) } } catch {
            throw CaskError.from(error, operation: "read key file", path: path, reading: true)
        }
        if count == Self.length {
            self = try EncryptionKey(bytes[0..<count])
            return
        }
        // Only the first bytes were read: say how long the file is.
        let size = count < bytes.count ? Int64(count) : ((try? fileSystem.fileSize(file.descriptor)) ?? Int64(count))
        var text = bytes[0..<count]
        if text.last == UInt8(ascii: "\n") { text = text.dropLast() }
        if text.last == UInt8(ascii: "\r") { text = text.dropLast() }
        guard text.count == 2 * Self.length, let decoded = Self.hex(text) else {
            throw CaskError.invalidEncryptionKey(
                reason: "key file \(path) holds \(size) bytes; a key file holds the key's 32 bytes, or 64 hexadecimal digits and a newline")
        }
        self = try EncryptionKey(decoded)
    }

    /// The bytes of 64 hexadecimal digits, or nil.
    private static func hex(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 2)
        var index = text.startIndex
        while index < text.endIndex {
            guard let high = nibble(text[index]), let low = nibble(text[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    /// The key as 64 lowercase hexadecimal digits and a newline: what `cask keygen` writes.
    public var hexKeyFile: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(2 * Self.length + 1)
        storage.withBytes { raw in
            for byte in raw {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0F)])
            }
        }
        text.append(UInt8(ascii: "\n"))
        return String(decoding: text, as: UTF8.self)
    }

    public static func == (lhs: EncryptionKey, rhs: EncryptionKey) -> Bool {
        lhs.storage.withBytes { a in rhs.storage.withBytes { b in sodium_memcmp(a.baseAddress!, b.baseAddress!, length) == 0 } }
    }
}

/// The key's bytes, in an allocation of their own that is wiped (`sodium_memzero`) on release.
final class KeyBytes: @unchecked Sendable {
    private let bytes: UnsafeMutableRawPointer

    init(_ source: [UInt8]) {
        precondition(source.count == EncryptionKey.length)
        bytes = UnsafeMutableRawPointer.allocate(byteCount: EncryptionKey.length, alignment: 16)
        source.withUnsafeBytes { bytes.copyMemory(from: $0.baseAddress!, byteCount: EncryptionKey.length) }
    }

    deinit {
        sodium_memzero(bytes, EncryptionKey.length)
        bytes.deallocate()
    }

    /// The 32 bytes, valid only during `body`.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(UnsafeRawBufferPointer(start: bytes, count: EncryptionKey.length))
    }
}

/// Encryption at rest, as ``CaskStore/Options/encryption`` asks for it.
public struct Encryption: Sendable, Equatable {
    /// The store's key; nil: the store is not encrypted.
    public let key: EncryptionKey?
    /// The algorithm a new store is created with; nil: ``EncryptionAlgorithm/preferred``. An
    /// existing store keeps the algorithm it was created with, whatever this says.
    public let algorithm: EncryptionAlgorithm?

    /// No encryption: the store's records are stored as they are. A store created encrypted does
    /// not open this way (``CaskError/encryptionKeyRequired(path:)``).
    public static let none = Encryption(key: nil, algorithm: nil)

    /// Every record's key and value, every hint file and every dictionary of the store sealed with
    /// `key` (FORMAT.md, "Encryption"). A new store is created encrypted; an existing store must
    /// have been created with this key (``CaskError/wrongKey(path:)`` otherwise), and a store
    /// created without encryption does not open this way (``CaskError/notEncrypted(path:)``: `cask
    /// rekey` encrypts one).
    public static func key(_ key: EncryptionKey, algorithm: EncryptionAlgorithm? = nil) -> Encryption {
        Encryption(key: key, algorithm: algorithm)
    }

    /// ``key(_:algorithm:)`` from the key's 32 bytes; a key of another length fails the open with
    /// ``CaskError/invalidEncryptionKey(reason:)``.
    public static func key(_ bytes: some Collection<UInt8>, algorithm: EncryptionAlgorithm? = nil) -> Encryption {
        do throws(CaskError) { return Encryption(key: try EncryptionKey(bytes), algorithm: algorithm) } catch {
            return Encryption(key: nil, algorithm: algorithm, invalidKeyLength: bytes.count)
        }
    }

    /// Set when ``key(_:algorithm:)`` was given bytes that are no key: the open fails, naming them.
    let invalidKeyLength: Int?

    private init(key: EncryptionKey?, algorithm: EncryptionAlgorithm?, invalidKeyLength: Int? = nil) {
        self.key = key
        self.algorithm = algorithm
        self.invalidKeyLength = invalidKeyLength
    }

    /// Whether a key was asked for (a valid one or not).
    var isRequested: Bool { key != nil || invalidKeyLength != nil }
}
