import Foundation

/// A store's object machinery: its cache, and pools of binary coders so that concurrent callers
/// each get one and reuse its buffers.
final class ObjectSupport: Sendable {
    let cache: ObjectCache?
    // Each core is used by one thread at a time: taken out of its pool, used, put back.
    private let encoders = Lock<[BinaryEncoderCore]>([])
    private let decoders = Lock<[BinaryDecoderCore]>([])

    /// Idle coders kept per pool.
    static let poolLimit = 8

    private let onUnreadableValue: (@Sendable (String, CaskError) -> Void)?
    /// Keys whose unreadable value was written to standard error (by the default handler).
    private let reportedUnreadable = Lock<Set<String>>([])

    init(_ options: CaskStore.ObjectOptions) {
        cache = options.cache.map { ObjectCache(limit: $0) }
        onUnreadableValue = options.onUnreadableValue
    }

    /// A typed key's subscript read `key`'s default because of `error` (``CaskStore/ObjectOptions/onUnreadableValue``).
    func reportUnreadable(_ key: String, _ error: CaskError) {
        if let onUnreadableValue { return onUnreadableValue(key, error) }
        guard reportedUnreadable.withLock({ $0.insert(key).inserted }) else { return }
        FileHandle.standardError.write(Data("Cask: store[\"\(key)\"] reads its default: \(error)\n".utf8))
    }

    func withEncoder<R, E: Error>(_ body: (BinaryEncoderCore) throws(E) -> R) throws(E) -> R {
        let core = encoders.withLock { $0.popLast() } ?? BinaryEncoderCore()
        defer { encoders.withLock { if $0.count < Self.poolLimit { $0.append(core) } } }
        return try body(core)
    }

    func withDecoder<R, E: Error>(_ body: (BinaryDecoderCore) throws(E) -> R) throws(E) -> R {
        let core = decoders.withLock { $0.popLast() } ?? BinaryDecoderCore()
        defer { decoders.withLock { if $0.count < Self.poolLimit { $0.append(core) } } }
        return try body(core)
    }
}
