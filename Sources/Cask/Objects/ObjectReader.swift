import Foundation

/// What is wrong with the bytes being decoded; containers turn it into a `DecodingError` carrying
/// their coding path.
struct ObjectFault: Error {
    enum Kind {
        /// The bytes are not a valid encoding (truncated, out of bounds, an invalid tag…).
        case corrupt
        /// The value is valid but of another type than the one asked for.
        case typeMismatch
        /// The value is null but a non-optional was asked for.
        case null
    }

    var kind: Kind
    var message: String
    /// The element of an array read in one go (`[String]`, `[Int]`, `[Double]`) the fault is in.
    var index: Int?

    static func corrupt(_ message: String) -> ObjectFault { ObjectFault(kind: .corrupt, message: message) }

    init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }
}

/// The tag of one value, read and bounds-checked.
struct ObjectHeader {
    /// Where the value starts (its tag).
    var offset: Int
    /// The tag byte.
    var tag: UInt8
    /// The integer (majors 0 and 1) or the length of the content (majors 2 to 5).
    var number: UInt64
    /// Where the content (or the fixed payload of a simple value) starts.
    var contentStart: Int
    /// Where the value ends: the next value starts here.
    var end: Int

    var major: ObjectFormat.Major { ObjectFormat.Major(rawValue: tag >> 5)! }

    /// A description of the value's kind for error messages ("a string", "an integer"…).
    var kindDescription: String {
        switch major {
        case .unsigned, .negative: "an integer"
        case .bytes: "bytes"
        case .string: "a string"
        case .array: "an unkeyed container"
        case .object: "a keyed container"
        case .reserved: "an invalid tag"
        case .simple:
            switch ObjectFormat.Simple(rawValue: tag) {
            case .null: "null"
            case .false, .true: "a Bool"
            case .float32, .float64: "a floating-point number"
            case .uuid: "a UUID"
            case .bigUnsigned, .bigNegative: "a 128-bit integer"
            case nil: "an invalid tag"
            }
        }
    }
}

/// Bounds-checked reads from the bytes being decoded: one of the few files with raw memory.
///
/// Every read checks its bounds against `limit` (a container's end, never past the input) before
/// touching a byte, and no length read from the input sizes anything before it is checked against
/// the bytes that remain. Not thread-safe; owned by one decoder.
struct ObjectReader {
    /// The input. Valid only while a decode is running; `count` is 0 otherwise so that a decoder
    /// kept past its call reads nothing.
    var bytes = UnsafeRawBufferPointer(start: nil, count: 0)

    /// Reads the tag at `offset` and checks that the whole value lies before `limit`.
    @inline(__always)
    func header(at offset: Int, limit: Int) throws(ObjectFault) -> ObjectHeader {
        guard offset >= 0, offset < limit, limit <= bytes.count else {
            throw .corrupt("the data ends where a value was expected (offset \(offset))")
        }
        let tag = bytes[offset]
        let argument = tag & 0x1F
        var position = offset + 1
        guard tag < 0xC0 else { return try simpleHeader(tag, at: offset, limit: limit) }
        var number = UInt64(argument)
        if argument >= ObjectFormat.varintArgument {
            guard argument == ObjectFormat.varintArgument else {
                throw .corrupt("invalid tag 0x\(String(tag, radix: 16)) at offset \(offset)")
            }
            guard let extra = Varint.read(UnsafeRawBufferPointer(rebasing: bytes[..<limit]), at: &position),
                  extra <= UInt64.max - ObjectFormat.immediateLimit else {
                throw .corrupt("malformed varint after the tag at offset \(offset)")
            }
            number = extra + ObjectFormat.immediateLimit
        }
        var end = position
        if tag >= 0x40 {  // bytes, string, array, object: `number` bytes of content follow
            guard number <= UInt64(limit - position) else {
                throw .corrupt("a length of \(number) bytes at offset \(offset) runs past the end of its container")
            }
            end = position + Int(number)
        }
        return ObjectHeader(offset: offset, tag: tag, number: number, contentStart: position, end: end)
    }

    @inline(never)
    private func simpleHeader(_ tag: UInt8, at offset: Int, limit: Int) throws(ObjectFault) -> ObjectHeader {
        guard tag >= 0xE0, let simple = ObjectFormat.Simple(rawValue: tag) else {
            throw .corrupt("invalid tag 0x\(String(tag, radix: 16)) at offset \(offset)")
        }
        let end = offset + 1 + simple.payloadLength
        guard end <= limit else { throw .corrupt("a fixed-size value at offset \(offset) runs past the end of its container") }
        return ObjectHeader(offset: offset, tag: tag, number: 0, contentStart: offset + 1, end: end)
    }

    /// A varint at `offset` (a field id), before `limit`.
    @inline(__always)
    func varint(at offset: inout Int, limit: Int) throws(ObjectFault) -> UInt64 {
        guard offset >= 0, limit <= bytes.count, let value = Varint.read(UnsafeRawBufferPointer(rebasing: bytes[..<limit]), at: &offset) else {
            throw .corrupt("malformed field id at offset \(offset)")
        }
        return value
    }

    @inline(__always)
    func littleEndian<T: FixedWidthInteger>(at offset: Int, as type: T.Type) -> T {
        bytes.readLittleEndian(at: offset, as: T.self)
    }

    /// The content of a string or bytes value (already bounds-checked by `header`).
    @inline(__always)
    func content(of header: ObjectHeader) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[header.contentStart..<header.end])
    }

    /// Whether `count` bytes at `start` equal the UTF-8 of `string`.
    @inline(__always)
    func bytes(at start: Int, count: Int, equal string: String) -> Bool {
        Self.utf8(of: string, equals: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)]))
    }

    /// Whether the UTF-8 of `string` is `bytes`.
    @inline(__always)
    static func utf8(of string: String, equals bytes: UnsafeRawBufferPointer) -> Bool {
        let utf8 = string.utf8
        guard utf8.count == bytes.count else { return false }
        if let equal = utf8.withContiguousStorageIfAvailable({ stored in
            // Names are short: a loop beats a call to memcmp.
            var index = 0
            while index < stored.count {
                if stored[index] != bytes[index] { return false }
                index &+= 1  // Safe: below stored.count.
            }
            return true
        }) {
            return equal
        }
        return utf8.elementsEqual(bytes)
    }

    /// Whether `count` bytes at `start` are valid UTF-8.
    @inline(__always)
    func isValidUTF8(at start: Int, count: Int) -> Bool {
        let bytes = UnsafeRawBufferPointer(rebasing: self.bytes[start..<(start + count)])
        return Self.isASCII(bytes) || UTF8Sequence.isValid(bytes)
    }

    /// Whether every byte is below 0x80, eight at a time.
    @inline(__always)
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= bytes.count {
            high |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            high |= UInt64(bytes[index])
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    // MARK: Values

    func string(_ header: ObjectHeader) throws(ObjectFault) -> String {
        switch header.major {
        case .string:
            // Valid UTF-8: the decoder checked every string of the record before decoding began.
            return String(decoding: content(of: header), as: UTF8.self)
        case .simple where header.tag == ObjectFormat.Simple.uuid.rawValue:
            return uuid(header).uuidString
        default:
            throw mismatch("a String", header)
        }
    }

    func uuid(_ header: ObjectHeader) -> UUID {
        let b = content(of: header)
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    func bool(_ header: ObjectHeader) throws(ObjectFault) -> Bool {
        switch header.tag {
        case ObjectFormat.Simple.true.rawValue: return true
        case ObjectFormat.Simple.false.rawValue: return false
        default: throw mismatch("a Bool", header)
        }
    }

    /// An integer of type `T`; a value that does not fit is an error, not a truncation.
    @inline(__always)
    func integer<T: FixedWidthInteger>(_ header: ObjectHeader, as type: T.Type) throws(ObjectFault) -> T {
        switch header.major {
        case .unsigned:
            if let value = T(exactly: header.number) { return value }
        case .negative:
            // -1 − number, computed without overflow: only signed types of enough width hold it.
            if T.isSigned, header.number <= UInt64(Int64.max), let value = T(exactly: -1 - Int64(header.number)) { return value }
        case .simple where header.tag == ObjectFormat.Simple.bigUnsigned.rawValue:
            if let value = T(exactly: littleEndian(at: header.contentStart, as: UInt128.self)) { return value }
        case .simple where header.tag == ObjectFormat.Simple.bigNegative.rawValue:
            let n = littleEndian(at: header.contentStart, as: UInt128.self)
            if T.isSigned, n <= UInt128(Int128.max), let value = T(exactly: -1 - Int128(n)) { return value }
        default:
            throw mismatch("an integer (\(T.self))", header)
        }
        throw ObjectFault(kind: .typeMismatch, message: "the integer at offset \(header.offset) does not fit in \(T.self)")
    }

    func double(_ header: ObjectHeader) throws(ObjectFault) -> Double {
        switch header.tag {
        case ObjectFormat.Simple.float64.rawValue:
            return Double(bitPattern: littleEndian(at: header.contentStart, as: UInt64.self))
        case ObjectFormat.Simple.float32.rawValue:
            return Double(Float(bitPattern: littleEndian(at: header.contentStart, as: UInt32.self)))
        default:
            // An integer field that became a Double: only when the Double holds it exactly.
            let value: Double? = switch header.major {
            case .unsigned: Double(exactly: header.number)
            case .negative: header.number <= UInt64(Int64.max) ? Double(exactly: -1 - Int64(header.number)) : nil
            default: throw mismatch("a Double", header)
            }
            guard let value else {
                throw ObjectFault(kind: .typeMismatch, message: "the integer at offset \(header.offset) is not exactly representable as a Double")
            }
            return value
        }
    }

    func float(_ header: ObjectHeader) throws(ObjectFault) -> Float {
        if header.tag == ObjectFormat.Simple.float32.rawValue {
            return Float(bitPattern: littleEndian(at: header.contentStart, as: UInt32.self))
        }
        let value = try double(header)
        let narrowed = Float(value)
        guard narrowed.isFinite || !value.isFinite else {
            throw ObjectFault(kind: .typeMismatch, message: "\(value) at offset \(header.offset) does not fit in Float")
        }
        return narrowed
    }

    func mismatch(_ expected: String, _ header: ObjectHeader) -> ObjectFault {
        if header.tag == ObjectFormat.Simple.null.rawValue {
            return ObjectFault(kind: .null, message: "expected \(expected), found null")
        }
        return ObjectFault(kind: .typeMismatch, message: "expected \(expected), found \(header.kindDescription)")
    }
}

/// The types a container reads straight from a value, without `init(from:)`.
protocol ObjectPrimitive {
    static func read(_ reader: ObjectReader, _ header: ObjectHeader) throws(ObjectFault) -> Self
}

extension Bool: ObjectPrimitive {
    @inline(__always) static func read(_ reader: ObjectReader, _ header: ObjectHeader) throws(ObjectFault) -> Bool { try reader.bool(header) }
}

extension String: ObjectPrimitive {
    @inline(__always) static func read(_ reader: ObjectReader, _ header: ObjectHeader) throws(ObjectFault) -> String { try reader.string(header) }
}

extension Double: ObjectPrimitive {
    @inline(__always) static func read(_ reader: ObjectReader, _ header: ObjectHeader) throws(ObjectFault) -> Double { try reader.double(header) }
}

extension Float: ObjectPrimitive {
    @inline(__always) static func read(_ reader: ObjectReader, _ header: ObjectHeader) throws(ObjectFault) -> Float { try reader.float(header) }
}

/// Every fixed-width integer reads as an integer that must fit.
protocol ObjectIntegerPrimitive: ObjectPrimitive, FixedWidthInteger {}

extension ObjectIntegerPrimitive {
    @inline(__always) static func read(_ reader: ObjectReader, _ header: ObjectHeader) throws(ObjectFault) -> Self {
        try reader.integer(header, as: Self.self)
    }
}

extension Int: ObjectIntegerPrimitive {}
extension Int8: ObjectIntegerPrimitive {}
extension Int16: ObjectIntegerPrimitive {}
extension Int32: ObjectIntegerPrimitive {}
extension Int64: ObjectIntegerPrimitive {}
extension Int128: ObjectIntegerPrimitive {}
extension UInt: ObjectIntegerPrimitive {}
extension UInt8: ObjectIntegerPrimitive {}
extension UInt16: ObjectIntegerPrimitive {}
extension UInt32: ObjectIntegerPrimitive {}
extension UInt64: ObjectIntegerPrimitive {}
extension UInt128: ObjectIntegerPrimitive {}
