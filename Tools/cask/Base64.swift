/// Base64 as RFC 4648 §4 defines it (the standard alphabet, `=` padding), read strictly: the
/// encoding of some bytes is exactly one text, and no other text decodes. No Foundation, no
/// intermediate strings: bytes in, bytes out.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Each byte's 6-bit value in the alphabet, or 0xFF.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// Appends the padded encoding of `bytes` to `output`.
    static func encode(_ bytes: ArraySlice<UInt8>, into output: inout [UInt8]) {
        output.reserveCapacity(output.count + (bytes.count + 2) / 3 * 4)
        var index = bytes.startIndex
        while bytes.endIndex - index >= 3 {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(group >> 18)])
            output.append(alphabet[Int(group >> 12 & 63)])
            output.append(alphabet[Int(group >> 6 & 63)])
            output.append(alphabet[Int(group & 63)])
            index += 3
        }
        switch bytes.endIndex - index {
        case 1:
            let group = UInt32(bytes[index]) << 16
            output += [alphabet[Int(group >> 18)], alphabet[Int(group >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        case 2:
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output += [alphabet[Int(group >> 18)], alphabet[Int(group >> 12 & 63)], alphabet[Int(group >> 6 & 63)], UInt8(ascii: "=")]
        default:
            break
        }
    }

    /// Why a text is not canonical base64.
    enum Problem: Error, Equatable {
        /// The length is not a multiple of 4 (the padding is missing, or there is too much).
        case length
        /// A byte outside the alphabet, or `=` before the end, at this offset of the text.
        case character(offset: Int)
        /// The bits after the last whole byte are not zero: another text encodes these bytes.
        case nonCanonical

        var description: String {
            switch self {
            case .length: "its length is not a multiple of 4 (padding with '=' is required)"
            case .character(let offset): "it has a character outside the base64 alphabet (or '=' before the end) at offset \(offset)"
            case .nonCanonical: "its last character has bits set past the data (not the canonical encoding)"
            }
        }
    }

    /// The bytes `text` encodes; throws unless `text` is exactly their padded encoding.
    static func decode(_ text: ArraySlice<UInt8>) throws(Problem) -> [UInt8] {
        guard text.count % 4 == 0 else { throw .length }
        guard !text.isEmpty else { return [] }
        var padding = 0
        if text[text.endIndex - 1] == UInt8(ascii: "=") { padding = text[text.endIndex - 2] == UInt8(ascii: "=") ? 2 : 1 }
        var output: [UInt8] = []
        output.reserveCapacity(text.count / 4 * 3 - padding)
        let table = values
        var index = text.startIndex
        let whole = text.endIndex - (padding > 0 ? 4 : 0)
        func sextet(_ position: Int) throws(Problem) -> UInt32 {
            let value = table[Int(text[position])]
            guard value != 0xFF else { throw .character(offset: position - text.startIndex) }
            return UInt32(value)
        }
        while index < whole {
            let group = try sextet(index) << 18 | sextet(index + 1) << 12 | sextet(index + 2) << 6 | sextet(index + 3)
            output.append(UInt8(group >> 16))
            output.append(UInt8(group >> 8 & 0xFF))
            output.append(UInt8(group & 0xFF))
            index += 4
        }
        if padding == 2 {
            let group = try sextet(index) << 18 | sextet(index + 1) << 12
            guard group & 0xFFFF == 0 else { throw .nonCanonical }
            output.append(UInt8(group >> 16))
        } else if padding == 1 {
            let group = try sextet(index) << 18 | sextet(index + 1) << 12 | sextet(index + 2) << 6
            guard group & 0xFF == 0 else { throw .nonCanonical }
            output.append(UInt8(group >> 16))
            output.append(UInt8(group >> 8 & 0xFF))
        }
        return output
    }
}
