/// The constants of Cask's binary object coding (FORMAT.md, "Object coding").
///
/// A record is `version` · root value · name table. Every value starts with one tag byte: the top
/// three bits are the major type, the low five the argument. Arguments 0...27 are the number itself
/// (an integer, or a length in bytes); 28 means a varint holding `number − 28` follows; 29...31 are
/// invalid. So every number has exactly one encoding.
enum ObjectFormat {
    /// The first byte of every record.
    static let version: UInt8 = 1

    /// The deepest nesting of containers either coder accepts. Deeper models are refused when
    /// encoding (so nothing is written that could not be read back) and when decoding (so corrupt
    /// input cannot exhaust the stack).
    static let maxDepth = 256

    /// Arguments below this are stored in the tag byte itself.
    static let immediateLimit: UInt64 = 28
    /// The tag argument announcing a varint of `number − immediateLimit`.
    static let varintArgument: UInt8 = 28

    enum Major: UInt8 {
        /// A non-negative integer: the number.
        case unsigned = 0
        /// A negative integer `-1 − number`.
        case negative = 1
        /// Bytes (`Data`, `[UInt8]`): the number is their length; the bytes follow.
        case bytes = 2
        /// A UTF-8 string: the number is its length in bytes.
        case string = 3
        /// An unkeyed container (arrays, sets, …): the number is the length of its elements, which follow.
        case array = 4
        /// A keyed container (structs, classes, enums with payloads, dictionaries): the number is the
        /// length of its fields, which follow, each a field id and a value.
        case object = 5
        /// Not used; a reader rejects it.
        case reserved = 6
        /// Fixed values: `Simple`.
        case simple = 7
    }

    /// The tag bytes of major type 7.
    enum Simple: UInt8 {
        case null = 0xE0
        case `false` = 0xE1
        case `true` = 0xE2
        /// Four bytes follow: an IEEE 754 binary32, little-endian.
        case float32 = 0xE3
        /// Eight bytes follow: an IEEE 754 binary64, little-endian.
        case float64 = 0xE4
        /// Sixteen bytes follow: the UUID's bytes in their usual order.
        case uuid = 0xE5
        /// Sixteen bytes follow: a `UInt128` above `UInt64.max`, little-endian.
        case bigUnsigned = 0xE6
        /// Sixteen bytes follow: `n` as a `UInt128`, little-endian, for the integer `-1 − n` below `Int64.min`.
        case bigNegative = 0xE7

        /// How many bytes follow the tag.
        var payloadLength: Int {
            switch self {
            case .null, .false, .true: 0
            case .float32: 4
            case .float64: 8
            case .uuid, .bigUnsigned, .bigNegative: 16
            }
        }
    }

    /// The tag of an empty keyed container, written for a value that encoded nothing.
    static let emptyObject: UInt8 = Major.object.rawValue << 5

    /// A field id: `index << 1` for a name in the record's name table, `zigzag(n) << 1 | 1` for an
    /// integer key `n` (the keys of `[Int: V]`).
    static func fieldID(nameIndex: Int) -> UInt64 { UInt64(nameIndex) << 1 }

    static func fieldID(intKey: Int) -> UInt64 {
        let zigzag = UInt64(bitPattern: Int64((intKey << 1) ^ (intKey >> (Int.bitWidth - 1))))
        return zigzag << 1 | 1
    }

    /// The integer of an integer field id (the low bit is set).
    static func intKey(fromFieldID id: UInt64) -> Int? {
        let zigzag = id >> 1
        let value = Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))
        return Int(exactly: value)
    }
}
