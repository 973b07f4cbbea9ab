/// The key of an element of an unkeyed container in a coding path, named as Foundation's coders
/// name it ("Index 3").
struct ObjectIndexKey: CodingKey {
    let index: Int

    init(_ index: Int) { self.index = index }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { index = intValue }

    var intValue: Int? { index }
    var stringValue: String { "Index \(index)" }
}

/// A key named by a string: `super`, and the keys of coding paths built from strings.
struct ObjectNameKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(_ name: String) {
        stringValue = name
        intValue = nil
    }

    init?(stringValue: String) { self.init(stringValue) }
    init?(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }

    static let `super` = ObjectNameKey("super")
}

extension CodingKey {
    /// The integer this key is encoded as, or nil when it is encoded by name: only keys whose name is
    /// their integer in decimal (the keys of `[Int: V]`), within ±2^62 so the field id fits 64 bits.
    @inline(__always)
    var objectIntegerKey: Int? {
        guard let int = intValue, int > -(1 << 62), int < (1 << 62), stringValue == String(int) else { return nil }
        return int
    }
}

/// Renders a coding path for error messages: `address.lines[2].text`.
func describeCodingPath(_ path: [any CodingKey]) -> String {
    var text = ""
    for key in path {
        if let index = key.intValue, key.stringValue == "Index \(index)" {
            text += "[\(index)]"
        } else {
            if !text.isEmpty { text += "." }
            text += key.stringValue
        }
    }
    return text
}
