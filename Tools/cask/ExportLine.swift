import Cask

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
/// exactly this shape, strictly (``ExportLineParser``): one of each pair, the optional expiry, no
/// other field and no field twice. Lines are written by ``ExportLineWriter``.
enum ExportLine {
    /// Appends the line of `entry`, newline included.
    static func append(_ entry: CaskStore.Entry, to output: inout [UInt8]) {
        ExportLineWriter.append(key: entry.key[...], value: entry.value[...], expiresAtMilliseconds: entry.expiresAtMilliseconds, to: &output)
    }

    /// The entry a line describes, checked against the store's limits; throws the reason it is
    /// malformed. `isFirstLine`: the line starts the input (only there may a byte-order mark be).
    static func decode(_ line: ArraySlice<UInt8>, isFirstLine: Bool, maxValueSize: Int) throws(ExportLineProblem) -> CaskStore.Entry {
        let parsed = try ExportLineParser.parse(line, isFirstLine: isFirstLine)
        if parsed.key.isEmpty { throw ExportLineProblem(reason: "the key is empty (keys are 1 to \(Limits.maxKeyLength) bytes)") }
        if parsed.key.count > Limits.maxKeyLength {
            throw ExportLineProblem(reason: "the key is \(parsed.key.count) bytes, over the limit of \(Limits.maxKeyLength) bytes")
        }
        if parsed.value.count > maxValueSize {
            throw ExportLineProblem(reason: "the value is \(parsed.value.count) bytes, over the limit of \(maxValueSize) bytes")
        }
        return CaskStore.Entry(key: parsed.key, value: parsed.value, expiresAtMilliseconds: parsed.expiresAtMilliseconds)
    }
}
