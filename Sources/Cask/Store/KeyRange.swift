/// Which keys a listing covers: all of them, those under a prefix, or those between two keys —
/// always in byte order (the order of `[UInt8]`'s `lexicographicallyPrecedes`, which for UTF-8
/// strings is the order of their code points).
///
/// ```swift
/// let drafts = try store.keys(in: .prefix("drafts/ada/"), limit: 20, order: .descending)
/// let march  = try store.keys(in: .from("log/2026-03-01", to: "log/2026-04-01"))
/// ```
public struct KeyRange: Hashable, Sendable {
    let span: KeySpan

    init(span: KeySpan) { self.span = span }

    /// Every key.
    public static let all = KeyRange(span: KeySpan())

    /// The keys that start with `prefix` (all keys for an empty prefix).
    public static func prefix(_ prefix: some Sequence<UInt8>) -> KeyRange {
        KeyRange(span: KeySpan(prefix: Array(prefix)))
    }

    /// The keys that start with `prefix`'s UTF-8 bytes.
    public static func prefix(_ prefix: String) -> KeyRange { .prefix(prefix.utf8) }

    /// The keys from `lower` (included) up to `upper` (excluded); nil: to the last key.
    public static func from(_ lower: some Sequence<UInt8>, to upper: [UInt8]? = nil) -> KeyRange {
        KeyRange(span: KeySpan(from: Array(lower), to: upper))
    }

    /// The keys from `lower` (included) up to `upper` (excluded), as UTF-8; nil: to the last key.
    public static func from(_ lower: String, to upper: String? = nil) -> KeyRange {
        .from(lower.utf8, to: upper.map { Array($0.utf8) })
    }

    /// The keys from `lower` through `upper`, both included.
    public static func from(_ lower: some Sequence<UInt8>, through upper: some Sequence<UInt8>) -> KeyRange {
        let lower = Array(lower)
        return KeyRange(span: KeySpan(lower: lower.isEmpty ? .unbounded : .included(lower), upper: .included(Array(upper))))
    }

    /// The keys from `lower` through `upper`, both included, as UTF-8.
    public static func from(_ lower: String, through upper: String) -> KeyRange { .from(lower.utf8, through: upper.utf8) }

    /// Whether `key` is in the range.
    public func contains(_ key: some Collection<UInt8>) -> Bool {
        Array(key).withUnsafeBytes { span.contains($0) }
    }
}

/// The order of a listing.
public enum KeyOrder: Sendable {
    /// From the smallest key up.
    case ascending
    /// From the largest key down (e.g. the newest of timestamped keys first).
    case descending

    var isDescending: Bool { self == .descending }
}
