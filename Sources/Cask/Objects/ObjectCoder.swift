import Foundation

/// How ``CaskStore`` turns values into bytes and back: per store (``CaskStore/ObjectOptions/coder``)
/// or per call (the `coder:` argument of ``CaskStore/set(_:forKey:coder:)`` and its peers).
///
/// A record is read with the coder that wrote it; the store does not record which one that was.
public enum ObjectCoder: Sendable, Hashable, CustomStringConvertible {
    /// Cask's binary coding (``CaskBinaryEncoder``): compact, fast, tolerant of model evolution. The default.
    case binary
    /// `JSONEncoder`/`JSONDecoder` with their default settings: readable by other tools.
    case json
    /// `PropertyListEncoder`/`PropertyListDecoder`, binary format: for data moved from property-list
    /// files or `UserDefaults`.
    case propertyList

    public var description: String {
        switch self {
        case .binary: "binary"
        case .json: "JSON"
        case .propertyList: "property list"
        }
    }
}
