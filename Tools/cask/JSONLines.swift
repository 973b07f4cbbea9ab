import Foundation

/// JSON Lines (`dump --json`, `export`): one compact JSON object per line, object keys sorted.
enum JSONLines {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// `value` as one line of JSON, newline included.
    static func line<T: Encodable>(_ value: T, encoder: JSONEncoder) throws(ToolError) -> [UInt8] {
        do {
            return Array(try encoder.encode(value)) + [UInt8(ascii: "\n")]
        } catch {
            throw .failure("cannot encode JSON: \(error)")
        }
    }
}
