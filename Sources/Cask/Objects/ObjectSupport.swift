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

    init(_ options: CaskStore.ObjectOptions) {
        cache = options.cache.map { ObjectCache(limit: $0) }
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
