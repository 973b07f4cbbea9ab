import Cask
import Foundation

/// One line of `cask export` output and of `cask import` input: a JSON object for one key.
///
/// ```
/// {"key":"user/42","value":"Ada"}
/// {"expiresAtMilliseconds":1767225600000,"keyBase64":"/wA=","valueBase64":"AAEC"}
/// ```
///
/// A key that is valid UTF-8 is the string `"key"`; any other key is `"keyBase64"` (RFC 4648
/// base64 with padding). Values likewise: `"value"` or `"valueBase64"`. `"expiresAtMilliseconds"`
/// (milliseconds since 1970-01-01 UTC) is present only for a key that expires. Import accepts
/// exactly this shape: one of each pair, the optional expiry, and no other field — so a misspelt
/// field is an error rather than an expiry silently dropped.
struct ExportLine: Codable, Equatable {
    var key: String?
    var keyBase64: String?
    var value: String?
    var valueBase64: String?
    var expiresAtMilliseconds: UInt64?

    /// Fields the format does not know are named in the error, not ignored.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case key, keyBase64, value, valueBase64, expiresAtMilliseconds
    }

    init(_ entry: CaskStore.Entry) {
        if let text = String(validating: entry.key, as: UTF8.self) { key = text } else { keyBase64 = Data(entry.key).base64EncodedString() }
        if let text = String(validating: entry.value, as: UTF8.self) { value = text } else { valueBase64 = Data(entry.value).base64EncodedString() }
        expiresAtMilliseconds = entry.expiresAtMilliseconds
    }

    init(from decoder: any Decoder) throws {
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        let all = try decoder.container(keyedBy: AnyKey.self)
        if let unknown = all.allKeys.first(where: { !known.contains($0.stringValue) }) {
            throw Self.problem("unknown field \"\(unknown.stringValue)\" (a line has \"key\" or \"keyBase64\", \"value\" or \"valueBase64\", and may have \"expiresAtMilliseconds\")")
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func string(_ field: CodingKeys) throws -> String? {
            guard container.contains(field) else { return nil }
            guard let text = try? container.decode(String.self, forKey: field) else {
                throw Self.problem("\"\(field.rawValue)\" is not a string")
            }
            return text
        }
        key = try string(.key)
        keyBase64 = try string(.keyBase64)
        value = try string(.value)
        valueBase64 = try string(.valueBase64)
        if container.contains(.expiresAtMilliseconds) {
            guard let time = try? container.decode(UInt64.self, forKey: .expiresAtMilliseconds) else {
                throw Self.problem("\"expiresAtMilliseconds\" is not an integer from 0 to \(UInt64.max)")
            }
            expiresAtMilliseconds = time
        }
    }

    private static func problem(_ reason: String) -> LineProblem {
        LineProblem(reason: reason)
    }

    /// The entry a line describes, checked against the store's limits; throws the reason it is malformed.
    static func decode(_ line: [UInt8], decoder: JSONDecoder, maxValueSize: Int) throws(LineProblem) -> CaskStore.Entry {
        let parsed: ExportLine
        do {
            parsed = try decoder.decode(ExportLine.self, from: Data(line))
        } catch let problem as LineProblem {
            throw problem
        } catch DecodingError.typeMismatch(let type, _) where type is [String: Any].Type {
            throw LineProblem(reason: "not a JSON object")
        } catch {
            throw LineProblem(reason: "not valid JSON")
        }
        let key = try bytes(parsed.key, parsed.keyBase64, "key")
        if key.isEmpty { throw LineProblem(reason: "the key is empty (keys are 1 to \(Limits.maxKeyLength) bytes)") }
        if key.count > Limits.maxKeyLength {
            throw LineProblem(reason: "the key is \(key.count) bytes, over the limit of \(Limits.maxKeyLength) bytes")
        }
        let value = try bytes(parsed.value, parsed.valueBase64, "value")
        if value.count > maxValueSize {
            throw LineProblem(reason: "the value is \(value.count) bytes, over the limit of \(maxValueSize) bytes")
        }
        return CaskStore.Entry(key: key, value: value, expiresAtMilliseconds: parsed.expiresAtMilliseconds)
    }

    /// The bytes of a `name` / `nameBase64` pair, exactly one of which must be present.
    private static func bytes(_ text: String?, _ base64: String?, _ name: String) throws(LineProblem) -> [UInt8] {
        switch (text, base64) {
        case (let text?, nil):
            return Array(text.utf8)
        case (nil, let base64?):
            guard let data = Data(base64Encoded: base64) else { throw LineProblem(reason: "\"\(name)Base64\" is not valid base64") }
            return [UInt8](data)
        case (nil, nil):
            throw LineProblem(reason: "no \(name): give \"\(name)\" (UTF-8 text) or \"\(name)Base64\"")
        case (_?, _?):
            throw LineProblem(reason: "both \"\(name)\" and \"\(name)Base64\" (give one)")
        }
    }

    /// Why a line is not an entry.
    struct LineProblem: Error {
        var reason: String
    }
}
