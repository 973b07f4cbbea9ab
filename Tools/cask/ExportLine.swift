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

    /// Reads the entry a line describes into `entry` (whose arrays' storage is reused) and checks
    /// it against the store's limits; throws the reason it is malformed. `isFirstLine`: the line
    /// starts the input (only there may a byte-order mark be).
    static func decode(
        _ line: ArraySlice<UInt8>, isFirstLine: Bool, maxValueSize: Int, into entry: inout ExportEntry, scratch: inout ExportLineParser.Scratch
    ) throws(ExportLineProblem) {
        try ExportLineParser.parse(line, isFirstLine: isFirstLine, into: &entry, scratch: &scratch)
        if entry.key.isEmpty { throw ExportLineProblem(reason: "the key is empty (keys are 1 to \(Limits.maxKeyLength) bytes)") }
        if entry.key.count > Limits.maxKeyLength {
            throw ExportLineProblem(reason: "the key is \(entry.key.count) bytes, over the limit of \(Limits.maxKeyLength) bytes")
        }
        if entry.value.count > maxValueSize {
            throw ExportLineProblem(reason: "the value is \(entry.value.count) bytes, over the limit of \(maxValueSize) bytes")
        }
    }
}
