import Foundation

/// Codable values in the store: `set`/`get` by key, typed keys, values under a prefix.
///
/// A value is stored as the record of its key, encoded with the store's coder
/// (``ObjectOptions/coder``, binary by default) or the one a call names. Thread-safety, durability
/// and errors are those of `put` and `get`; encoding and decoding failures are
/// ``CaskError/objectEncodingFailed(key:type:codingPath:reason:)`` and
/// ``CaskError/objectDecodingFailed(key:type:codingPath:reason:)``, naming the key and where in the
/// value the problem is.
extension CaskStore {
    // MARK: Writing

    /// Sets `key` to `value`, encoded with `coder` (default: the store's). An optional `value` that
    /// is `nil` deletes the key instead, as for typed keys (``set(_:for:)``).
    ///
    /// Durable on return as the store's ``Durability`` says. Throws
    /// ``CaskError/objectEncodingFailed(key:type:codingPath:reason:)`` — nothing written — when the
    /// value does not encode, and otherwise what `put` throws. With the binary coder the value is
    /// encoded into a pooled buffer and written from there, without an intermediate copy.
    public func set<T: Encodable>(_ value: T, forKey key: String, coder: ObjectCoder? = nil) throws(CaskError) {
        try set(value, forKey: key, coder: coder, expiresAt: nil)
    }

    /// Sets `key` to `value` until `duration` from now (wall-clock): from then on it reads as absent,
    /// across reopens, and compaction drops it (see ``put(_:_:expiresAfter:)-(_,_,Duration)``).
    public func set<T: Encodable>(_ value: T, forKey key: String, expiresAfter duration: Duration, coder: ObjectCoder? = nil) throws(CaskError) {
        try set(value, forKey: key, coder: coder, expiresAt: duration.expiry(after: Self.nowMilliseconds()))
    }

    /// Sets `key` to `value` until the wall-clock time `date`: a date before 1970 expires at once,
    /// and one past the last time a record holds (2^64 ms after 1970) is that time.
    public func set<T: Encodable>(_ value: T, forKey key: String, expiresAt date: Date, coder: ObjectCoder? = nil) throws(CaskError) {
        let seconds = date.timeIntervalSince1970
        // NaN and anything at or past 2^64 ms clamp, rather than trap in the conversion.
        let milliseconds = seconds.isNaN || seconds <= 0 ? 0 : seconds * 1000 >= 0x1p64 ? UInt64.max : UInt64(seconds * 1000)
        try set(value, forKey: key, coder: coder, expiresAt: milliseconds)
    }

    private func set<T: Encodable>(_ value: T, forKey key: String, coder: ObjectCoder?, expiresAt: UInt64?) throws(CaskError) {
        // One rule for nil, as for typed keys: an optional that holds nothing deletes the key
        // (it wrote a null record, which `contains` and `count` then counted).
        if let optional = value as? any ObjectOptionalValue, optional.isNone {
            try delete(key)
            return
        }
        try withEncodedObject(value, forKey: key, coder: coder ?? options.objects.coder) { (bytes) throws(CaskError) in
            try Self.withContiguousBytes(key.utf8) { (keyBytes) throws(CaskError) in
                _ = try write(.put, key: keyBytes, value: bytes, expiresAt: expiresAt)
            }
        }
    }

    /// `value` encoded with the store's coder, as ``set(_:forKey:coder:)`` would store it for `key`.
    func encodeObject<T: Encodable>(_ value: T, forKey key: String) throws(CaskError) -> [UInt8] {
        try withEncodedObject(value, forKey: key, coder: options.objects.coder) { Array($0) }
    }

    /// Calls `body` with `value` encoded by `coder` for `key`: with the binary coder, the bytes in
    /// a pooled encoder's buffer (no intermediate copy). Throws
    /// ``CaskError/objectEncodingFailed(key:type:codingPath:reason:)`` when it does not encode.
    func withEncodedObject<T: Encodable, R>(
        _ value: T, forKey key: String, coder: ObjectCoder, _ body: (UnsafeRawBufferPointer) throws(CaskError) -> R
    ) throws(CaskError) -> R {
        guard coder == .binary else {
            let data: Data
            do { data = try Self.foundationEncode(value, coder) } catch {
                throw Self.objectError(error, key: key, type: T.self, decoding: false)
            }
            return try Self.withContiguousBytes(data, body)
        }
        return try objects.withEncoder { (core) throws(CaskError) in
            do { try core.encode(value) } catch {
                throw Self.objectError(error, key: key, type: T.self, decoding: false)
            }
            return try core.writer.withUnsafeBytes { (bytes) throws(CaskError) in try body(bytes) }
        }
    }

    // MARK: Reading

    /// The value of `key` decoded as `T` with `coder` (default: the store's), or nil when the key is
    /// absent.
    ///
    /// Throws ``CaskError/objectDecodingFailed(key:type:codingPath:reason:)`` when the record does
    /// not decode as `T` (another type or coder wrote it, or a model change the coding cannot bridge),
    /// and otherwise what `get` throws. Never uses the decoded-object cache: for types that are not
    /// `Sendable`, whose decoded values the cache cannot share between threads.
    public func get<T: Decodable>(uncached type: T.Type, forKey key: String, coder: ObjectCoder? = nil) throws(CaskError) -> T? {
        var value: T?
        try Self.withKeyBytes(key) { (keyBytes) throws(CaskError) in
            _ = try readObject(T.self, key: keyBytes, name: key, coder: coder ?? options.objects.coder, into: &value)
        }
        return value
    }

    /// The overload generic code over `T: Decodable` reaches: it works, but cannot use the
    /// decoded-object cache, so the compiler says so.
    @available(*, deprecated, message: "T is not known to be Sendable, so this read bypasses the decoded-object cache: constrain T to Sendable (T: Codable & Sendable), or say get(uncached:forKey:) to mean it")
    public func get<T: Decodable>(_ type: T.Type, forKey key: String, coder: ObjectCoder? = nil) throws(CaskError) -> T? {
        try get(uncached: type, forKey: key, coder: coder)
    }

    /// The value of `key` decoded as `T` with `coder` (default: the store's), or nil when the key is
    /// absent; served from the decoded-object cache when the store has one (``ObjectOptions/cache``)
    /// and the key has not been written since the value was cached.
    ///
    /// Throws ``CaskError/objectDecodingFailed(key:type:codingPath:reason:)`` when the record does
    /// not decode as `T`, and otherwise what `get` throws.
    public func get<T: Decodable & Sendable>(_ type: T.Type, forKey key: String, coder: ObjectCoder? = nil) throws(CaskError) -> T? {
        var value: T?
        try Self.withKeyBytes(key) { (keyBytes) throws(CaskError) in
            try cachedObject(T.self, key: keyBytes, name: key, coder: coder ?? options.objects.coder, into: &value)
        }
        return value
    }

    /// Every key starting with `prefix` whose value decodes as `T`, with its value, sorted bytewise by
    /// key (`drafts/ada/` gives all of Ada's drafts, in key order).
    ///
    /// Throws ``CaskError/objectDecodingFailed(key:type:codingPath:reason:)`` for the first value under
    /// the prefix that does not decode as `T`: keep one type per prefix. A key deleted while the scan
    /// runs is left out. Keys that are not UTF-8 come back with replacement characters.
    /// Complexity: that of ``keys(prefix:)`` plus one read and decode per key (or a cache hit).
    /// Never uses the decoded-object cache: for types that are not `Sendable`.
    public func values<T: Decodable>(uncached type: T.Type, prefix: String = "", coder: ObjectCoder? = nil) throws(CaskError) -> [(key: String, value: T)] {
        let coder = coder ?? options.objects.coder
        var result: [(key: String, value: T)] = []
        for key in try keys(prefix: Array(prefix.utf8)) {
            let name = String(decoding: key, as: UTF8.self)
            var value: T?
            try key.withBytes { (keyBytes) throws(CaskError) in _ = try readObject(T.self, key: keyBytes, name: name, coder: coder, into: &value) }
            if let value { result.append((name, value)) }
        }
        return result
    }

    /// The overload generic code over `T: Decodable` reaches, which cannot use the cache.
    @available(*, deprecated, message: "T is not known to be Sendable, so this read bypasses the decoded-object cache: constrain T to Sendable (T: Codable & Sendable), or say values(uncached:prefix:) to mean it")
    public func values<T: Decodable>(of type: T.Type, prefix: String = "", coder: ObjectCoder? = nil) throws(CaskError) -> [(key: String, value: T)] {
        try values(uncached: type, prefix: prefix, coder: coder)
    }

    /// As ``values(uncached:prefix:coder:)``, through the decoded-object cache.
    public func values<T: Decodable & Sendable>(of type: T.Type, prefix: String = "", coder: ObjectCoder? = nil) throws(CaskError) -> [(key: String, value: T)] {
        let coder = coder ?? options.objects.coder
        var result: [(key: String, value: T)] = []
        for key in try keys(prefix: Array(prefix.utf8)) {
            let name = String(decoding: key, as: UTF8.self)
            var value: T?
            try key.withBytes { (keyBytes) throws(CaskError) in try cachedObject(T.self, key: keyBytes, name: name, coder: coder, into: &value) }
            if let value { result.append((name, value)) }
        }
        return result
    }

    /// What the decoded-object cache did so far; nil when the store has none.
    public var objectCacheStatistics: ObjectCacheStatistics? {
        objects.cache?.statistics
    }

    // MARK: Typed keys

    /// The value of `key`, or its default when absent.
    ///
    /// Never throws: a record that cannot be read or decoded also reads as the default, and is
    /// reported (``ObjectOptions/onUnreadableValue``; by default the first time per key on standard
    /// error). Use ``value(for:)`` to handle those as errors, and ``set(_:for:)`` to write.
    public subscript<Value>(key: Key<Value>) -> Value {
        do { return try value(for: key) } catch {
            objects.reportUnreadable(key.name, error)
            return key.defaultValue
        }
    }

    /// The value of `key`, or its default when absent. Throws as ``get(_:forKey:coder:)``.
    public func value<Value>(for key: Key<Value>) throws(CaskError) -> Value {
        var value: Value?
        try Self.withKeyBytes(key.name) { (keyBytes) throws(CaskError) in
            try cachedObject(Value.self, key: keyBytes, name: key.name, coder: key.coder ?? options.objects.coder, into: &value)
        }
        return value ?? key.defaultValue
    }

    /// Sets `key` to `value`; for an optional value, `nil` deletes the key. Throws as
    /// ``set(_:forKey:coder:)``.
    public func set<Value>(_ value: Value, for key: Key<Value>) throws(CaskError) {
        try set(value, forKey: key.name, coder: key.coder)  // which deletes for nil
    }

    /// Sets `key` to `value` until `duration` from now (wall-clock): from then on it reads as its
    /// default, across reopens, and observers get `.expire`. For an optional value, `nil` deletes
    /// the key. Throws as ``set(_:forKey:expiresAfter:coder:)``.
    public func set<Value>(_ value: Value, for key: Key<Value>, expiresAfter duration: Duration) throws(CaskError) {
        try set(value, forKey: key.name, expiresAfter: duration, coder: key.coder)  // which deletes for nil
    }

    /// Deletes `key`'s value, so that it reads as its default. Returns whether it had one.
    @discardableResult
    public func removeValue<Value>(for key: Key<Value>) throws(CaskError) -> Bool {
        try delete(key.name)
    }

    // MARK: Internals

    /// Reads and decodes through the cache, if there is one.
    ///
    /// The cache entry is stamped with the index location looked up *before* the record is read:
    /// a write racing this read can only make the bytes newer than the stamp, and an entry whose
    /// stamp is older than the key's current location is never served.
    ///
    /// The value is decoded into `value` (left nil when the key is absent), never copied on its way
    /// out: a copy of a model in generic code retains each of its strings and arrays.
    func cachedObject<T: Decodable & Sendable>(
        _ type: T.Type, key: UnsafeRawBufferPointer, name: String, coder: ObjectCoder, into value: inout T?
    ) throws(CaskError) {
        guard let cache = objects.cache else {
            _ = try readObject(T.self, key: key, name: name, coder: coder, into: &value)
            return
        }
        let location = try state.read { (shared) throws(CaskError) -> RecordLocation? in
            if shared.closed { throw CaskError.closed(path: directory) }
            guard let location = shared.index.lookup(key) else { return nil }
            // An expired key is absent, whatever the cache holds for it.
            if !shared.expiries.isEmpty, shared.expiries.isExpired(key, now: Self.nowMilliseconds()) { return nil }
            return location
        }
        guard let location else { return }
        // Unwrapped before the cast: a miss (nil) cast to an Optional `T` would succeed, as `T`'s nil.
        if let cached = cache.value(forKey: name, at: location, type: ObjectIdentifier(T.self), coder: coder), let hit = cached as? T {
            value = hit
            return
        }
        guard let size = try readObject(T.self, key: key, name: name, coder: coder, into: &value), let decoded = value else { return }
        cache.insert(decoded, forKey: name, at: location, type: ObjectIdentifier(T.self), coder: coder, cost: size)
    }

    /// Reads the value of `key` and decodes it where it was read (the segment's mapping or a
    /// buffer on the stack, see ``withValue(_:_:)-(Collection<UInt8>,_)``), with no intermediate
    /// array, into `value`; returns its encoded size, or nil (`value` untouched) when the key is absent.
    func readObject<T: Decodable>(_ type: T.Type, key: UnsafeRawBufferPointer, name: String, coder: ObjectCoder, into value: inout T?) throws(CaskError) -> Int? {
        var failure: CaskError?
        var size: Int?
        try visitValue(key: key) { bytes in
            size = bytes.count
            do throws(CaskError) { value = try decodeObject(T.self, from: bytes, key: name, coder: coder) } catch { failure = error }
        }
        if let failure { throw failure }
        return size
    }

    /// Calls `body` with the UTF-8 bytes of `key`. Not generic, unlike ``withContiguousBytes(_:_:)``:
    /// in the object reads, which are not specialized, that one costs metadata lookups per call.
    static func withKeyBytes(_ key: String, _ body: (UnsafeRawBufferPointer) throws(CaskError) -> Void) throws(CaskError) {
        var key = key
        var failure: CaskError?
        key.withUTF8 { utf8 in
            do throws(CaskError) { try body(UnsafeRawBufferPointer(utf8)) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    func decodeObject<T: Decodable>(_ type: T.Type, from bytes: UnsafeRawBufferPointer, key: String, coder: ObjectCoder) throws(CaskError) -> T {
        do {
            switch coder {
            case .binary:
                return try objects.withDecoder { core in try core.decode(T.self, from: bytes) }
            case .json:
                return try JSONDecoder().decode(T.self, from: Data(bytes))
            case .propertyList:
                return try PropertyListDecoder().decode(T.self, from: Data(bytes))
            }
        } catch {
            throw Self.objectError(error, key: key, type: T.self, decoding: true)
        }
    }

    static func foundationEncode<T: Encodable>(_ value: T, _ coder: ObjectCoder) throws -> Data {
        switch coder {
        case .json: return try JSONEncoder().encode(value)
        case .propertyList: return try PropertyListEncoder().encode(value)
        case .binary: return Data(try CaskBinaryEncoder().encode(value))
        }
    }

    /// A coding failure as a ``CaskError`` naming the key, the type and the coding path.
    static func objectError(_ error: any Error, key: String, type: Any.Type, decoding: Bool) -> CaskError {
        var path: [any CodingKey] = []
        var reason = String(describing: error)
        var underlying: (any Error)?
        if let error = error as? DecodingError {
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
                path = context.codingPath
                reason = context.debugDescription
                underlying = context.underlyingError
            case .keyNotFound(let key, let context):
                path = context.codingPath + [key]
                reason = "the required field \"\(key.stringValue)\" is missing"
            @unknown default:
                break
            }
        } else if let error = error as? EncodingError {
            switch error {
            case .invalidValue(_, let context):
                path = context.codingPath
                reason = context.debugDescription
                underlying = context.underlyingError
            @unknown default:
                break
            }
        }
        if let underlying { reason += " (\(underlying))" }
        let typeName = String(describing: type)
        let codingPath = describeCodingPath(path)
        return decoding
            ? .objectDecodingFailed(key: key, type: typeName, codingPath: codingPath, reason: reason)
            : .objectEncodingFailed(key: key, type: typeName, codingPath: codingPath, reason: reason)
    }
}
