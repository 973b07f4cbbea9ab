import Foundation

/// A property-list value — what a `.plist` file or `UserDefaults` holds — as a `Codable` enum, so it
/// can be stored with any ``ObjectCoder`` and read back exactly. ``typedValue()`` gives it as the
/// Swift type it has (`Bool`, `[String]`, …), which is how `cask import-defaults` stores an entry;
/// an entry whose arrays or dictionaries mix kinds has no such type, and is stored as this enum:
///
/// ```swift
/// let mixed = try store.get(PropertyListValue.self, forKey: "defaults/mixed")   // .array([.integer(1), .string("two")])
/// if case .array(let items)? = mixed { … }
/// let object = mixed?.propertyListObject   // [Any], for PropertyListSerialization
/// ```
///
/// Read it with the coder that wrote it (the store's, binary by default). Each value is encoded as a
/// keyed container with one field that names its kind — `{"integer": 12}`, `{"bool": true}`,
/// `{"dictionary": {"name": {"string": "Ada"}}}` — so that, whatever the coder, a `Bool` never reads
/// back as a number, a `Date` as a `Double`, nor `Data` as a `String` (which JSON would make of it).
public enum PropertyListValue: Sendable, Hashable, Codable {
    case string(String)
    case integer(Int)
    case real(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])

    /// Why a Foundation object is not a property-list value this type holds.
    public struct ConversionError: Error, Equatable, Sendable, CustomStringConvertible {
        /// Where in the object: `""` for the object itself, else like `items[2].name`.
        public var path: String
        public var reason: String

        public var description: String { path.isEmpty ? reason : "\(reason) at \(path)" }
    }

    /// Converts what `PropertyListSerialization` (or `UserDefaults.dictionaryRepresentation()`)
    /// returns: `String`, `NSNumber` (a boolean, an integer that fits `Int`, or a floating-point
    /// number), `Date`, `Data`, and arrays and string-keyed dictionaries of these.
    ///
    /// A boolean is told from a number by the number's type (`objCType` `c`, as `CFBoolean` and Swift's
    /// `Bool` report it), never by its value: `<true/>` becomes `.bool(true)`, `<integer>1</integer>`
    /// `.integer(1)`. Throws ``ConversionError`` for anything else, such as an integer above
    /// `Int.max`, a set (`NSSet`, `Set`), or a dictionary key that is not a string. To read a
    /// property-list file, use ``PropertyListReader``, which parses the bytes itself.
    public init(propertyList object: Any) throws(ConversionError) {
        self = try Self.convert(object, path: "")
    }

    private static func convert(_ object: Any, path: String) throws(ConversionError) -> PropertyListValue {
        // Before any bridging: casting an NSSet that holds objects to a Swift collection can crash
        // inside Foundation.
        if object is NSSet || object is Set<AnyHashable> {
            throw ConversionError(path: path, reason: "a set is not a property-list type")
        }
        if let string = object as? String { return .string(string) }
        if let date = object as? Date { return .date(date) }
        if let data = object as? Data { return .data(data) }
        if let number = object as? NSNumber {
            switch String(cString: number.objCType) {
            case "c", "B":
                return .bool(number.boolValue)
            case "f", "d":
                return .real(number.doubleValue)
            case "Q", "L", "I", "S", "C":
                guard number.uint64Value <= UInt64(Int.max) else {
                    throw ConversionError(path: path, reason: "integer \(number.uint64Value) is larger than \(Int.max)")
                }
                return .integer(Int(number.uint64Value))
            default:
                return .integer(number.intValue)
            }
        }
        if let array = object as? [Any] {
            var values: [PropertyListValue] = []
            values.reserveCapacity(array.count)
            for (index, element) in array.enumerated() { values.append(try convert(element, path: "\(path)[\(index)]")) }
            return .array(values)
        }
        if let dictionary = object as? [AnyHashable: Any] {
            var values: [String: PropertyListValue] = [:]
            for (key, element) in dictionary {
                guard let name = key.base as? String else {
                    throw ConversionError(path: path, reason: "dictionary key \(key) is not a string")
                }
                values[name] = try convert(element, path: path.isEmpty ? name : "\(path).\(name)")
            }
            return .dictionary(values)
        }
        throw ConversionError(path: path, reason: "\(type(of: object)) is not a property-list type")
    }

    /// The value as Foundation property-list objects (`String`, `Int`, `Double`, `Bool`, `Date`,
    /// `Data`, `[Any]`, `[String: Any]`), as `PropertyListSerialization` and `UserDefaults` take them.
    public var propertyListObject: Any {
        switch self {
        case .string(let value): value
        case .integer(let value): value
        case .real(let value): value
        case .bool(let value): value
        case .date(let value): value
        case .data(let value): value
        case .array(let values): values.map(\.propertyListObject)
        case .dictionary(let values): values.mapValues(\.propertyListObject)
        }
    }

    // MARK: Codable

    private enum Kind: String, CodingKey {
        case string, integer, real, bool, date, data, array, dictionary
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Kind.self)
        switch self {
        case .string(let value): try container.encode(value, forKey: .string)
        case .integer(let value): try container.encode(value, forKey: .integer)
        case .real(let value): try container.encode(value, forKey: .real)
        case .bool(let value): try container.encode(value, forKey: .bool)
        case .date(let value): try container.encode(value, forKey: .date)
        case .data(let value): try container.encode(value, forKey: .data)
        case .array(let values): try container.encode(values, forKey: .array)
        case .dictionary(let values): try container.encode(values, forKey: .dictionary)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Kind.self)
        guard container.allKeys.count == 1, let kind = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "a property-list value has exactly one of the fields string, integer, real, bool, date, data, array, dictionary; found \(container.allKeys.count)"))
        }
        switch kind {
        case .string: self = .string(try container.decode(String.self, forKey: kind))
        case .integer: self = .integer(try container.decode(Int.self, forKey: kind))
        case .real: self = .real(try container.decode(Double.self, forKey: kind))
        case .bool: self = .bool(try container.decode(Bool.self, forKey: kind))
        case .date: self = .date(try container.decode(Date.self, forKey: kind))
        case .data: self = .data(try container.decode(Data.self, forKey: kind))
        case .array: self = .array(try container.decode([PropertyListValue].self, forKey: kind))
        case .dictionary: self = .dictionary(try container.decode([String: PropertyListValue].self, forKey: kind))
        }
    }
}
