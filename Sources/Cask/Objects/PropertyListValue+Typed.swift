import Foundation

extension PropertyListValue {
    /// The value as the Swift type a program reads it as: `String`, `Int`, `Double`, `Bool`, `Date`,
    /// `Data`, or an array (`[T]`) or a string-keyed dictionary (`[String: T]`) of one such type,
    /// nested to any depth. `cask import-defaults` stores each entry this way, so that
    ///
    /// ```swift
    /// try store.set(try value.typedValue(), forKey: "defaults/recent")   // as store.set(["a.txt", "b.txt"], …)
    /// let recent = try store.get([String].self, forKey: "defaults/recent")
    /// ```
    ///
    /// writes exactly the bytes `store.set` writes for the Swift value, with any coder, and typed
    /// keys of the natural type read it.
    ///
    /// An empty array or dictionary takes the element type of its siblings (`[[1], []]` is an
    /// `[[Int]]`); one with none is a `[String]` or `[String: String]` — every coder writes an empty
    /// container the same whatever its element type, so it reads back as any array or dictionary.
    ///
    /// Throws ``ConversionError`` naming the container (`list`, `inner.deep[2]`) when an array or a
    /// dictionary mixes kinds — `[1, "two"]`, or an integer beside a real — since no Swift type
    /// holds it; store such a value as the `PropertyListValue` itself. Complexity: O(n) in the
    /// number of values.
    public func typedValue() throws(ConversionError) -> any Codable & Sendable {
        let type = TypedShape.swiftType(try TypedShape(of: self, path: ""))
        // Safe: the shape was read from this value, and every array and dictionary in it holds
        // values of its one element shape (or is empty), which is all `make` checks.
        guard let typed = type.make(from: self) else {
            preconditionFailure("a property-list value does not have the shape read from it")
        }
        return typed
    }
}

/// The kind of a property-list value, with the element kind of its arrays and dictionaries (nil
/// for an empty one, whose elements may be of any kind).
private indirect enum TypedShape: Equatable {
    case string, integer, real, bool, date, data
    case array(TypedShape?)
    case dictionary(TypedShape?)

    /// The shape of `value`; throws when a container in it, at `path` or below, mixes kinds.
    init(of value: PropertyListValue, path: String) throws(PropertyListValue.ConversionError) {
        switch value {
        case .string: self = .string
        case .integer: self = .integer
        case .real: self = .real
        case .bool: self = .bool
        case .date: self = .date
        case .data: self = .data
        case .array(let values):
            var element: TypedShape?
            for (index, value) in values.enumerated() {
                element = try Self.merge(element, TypedShape(of: value, path: "\(path)[\(index)]"), path: path, container: "array")
            }
            self = .array(element)
        case .dictionary(let values):
            var element: TypedShape?
            // Sorted, so that the same dictionary is always reported the same way.
            for (key, value) in values.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                element = try Self.merge(element, TypedShape(of: value, path: path.isEmpty ? key : "\(path).\(key)"), path: path, container: "dictionary")
            }
            self = .dictionary(element)
        }
    }

    /// Adds the shape of one more element of a container to the shape of those before it.
    private static func merge(_ elements: TypedShape?, _ element: TypedShape, path: String, container: String) throws(PropertyListValue.ConversionError) -> TypedShape {
        guard let elements else { return element }
        guard let merged = unify(elements, element) else {
            throw PropertyListValue.ConversionError(path: path, reason: "the \(container) mixes \(elements.name) and \(element.name) values")
        }
        return merged
    }

    /// The one shape of `a` and `b`, an unknown element type taking the other's; nil when they differ.
    private static func unify(_ a: TypedShape, _ b: TypedShape) -> TypedShape? {
        switch (a, b) {
        case (.array(let x), .array(let y)):
            guard let x, let y else { return .array(x ?? y) }
            return unify(x, y).map { .array($0) }
        case (.dictionary(let x), .dictionary(let y)):
            guard let x, let y else { return .dictionary(x ?? y) }
            return unify(x, y).map { .dictionary($0) }
        default:
            return a == b ? a : nil
        }
    }

    /// The kind, for a message: `integer`, `array of string`.
    var name: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .real: "real"
        case .bool: "boolean"
        case .date: "date"
        case .data: "data"
        case .array(let element?): "array of \(element.name)"
        case .array(nil): "array"
        case .dictionary(let element?): "dictionary of \(element.name)"
        case .dictionary(nil): "dictionary"
        }
    }

    /// The Swift type of a value of `shape` (a `String` where the shape is unknown).
    static func swiftType(_ shape: TypedShape?) -> any PropertyListTyped.Type {
        switch shape {
        case nil, .string?: String.self
        case .integer?: Int.self
        case .real?: Double.self
        case .bool?: Bool.self
        case .date?: Date.self
        case .data?: Data.self
        case .array(let element)?: arrayType(swiftType(element))
        case .dictionary(let element)?: dictionaryType(swiftType(element))
        }
    }

    private static func arrayType<Element: PropertyListTyped>(_: Element.Type) -> any PropertyListTyped.Type { [Element].self }
    private static func dictionaryType<Element: PropertyListTyped>(_: Element.Type) -> any PropertyListTyped.Type { [String: Element].self }
}

/// A Swift type that a property-list value of one shape converts to (see ``PropertyListValue/typedValue()``).
protocol PropertyListTyped: Codable, Sendable {
    /// `value` as this type, or nil when it is not of this type's shape.
    static func make(from value: PropertyListValue) -> Self?
}

extension String: PropertyListTyped {
    static func make(from value: PropertyListValue) -> String? {
        if case .string(let string) = value { string } else { nil }
    }
}

extension Int: PropertyListTyped {
    static func make(from value: PropertyListValue) -> Int? {
        if case .integer(let integer) = value { integer } else { nil }
    }
}

extension Double: PropertyListTyped {
    static func make(from value: PropertyListValue) -> Double? {
        if case .real(let real) = value { real } else { nil }
    }
}

extension Bool: PropertyListTyped {
    static func make(from value: PropertyListValue) -> Bool? {
        if case .bool(let bool) = value { bool } else { nil }
    }
}

extension Date: PropertyListTyped {
    static func make(from value: PropertyListValue) -> Date? {
        if case .date(let date) = value { date } else { nil }
    }
}

extension Data: PropertyListTyped {
    static func make(from value: PropertyListValue) -> Data? {
        if case .data(let data) = value { data } else { nil }
    }
}

extension Array: PropertyListTyped where Element: PropertyListTyped {
    static func make(from value: PropertyListValue) -> [Element]? {
        guard case .array(let values) = value else { return nil }
        var result: [Element] = []
        result.reserveCapacity(values.count)
        for value in values {
            guard let element = Element.make(from: value) else { return nil }
            result.append(element)
        }
        return result
    }
}

extension Dictionary: PropertyListTyped where Key == String, Value: PropertyListTyped {
    static func make(from value: PropertyListValue) -> [String: Value]? {
        guard case .dictionary(let values) = value else { return nil }
        var result: [String: Value] = [:]
        result.reserveCapacity(values.count)
        for (key, value) in values {
            guard let element = Value.make(from: value) else { return nil }
            result[key] = element
        }
        return result
    }
}
