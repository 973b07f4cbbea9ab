import Foundation

/// Reads a binary property list (`bplist00`) for ``PropertyListReader``.
///
/// The layout: the 8-byte header, the objects, the offset table (one big-endian offset of
/// `offsetIntSize` bytes per object) and a 32-byte trailer: 5 unused bytes, the sort version,
/// `offsetIntSize`, `objectRefSize`, then `numObjects`, `topObject` and `offsetTableOffset` as
/// big-endian `UInt64`. Every field is checked before it is used; every object must lie between the
/// header and the offset table, and every length must fit in the bytes before the offset table.
struct BinaryPropertyListParser {
    private typealias Error = PropertyListReader.Error

    private let bytes: [UInt8]
    private let offsetIntSize: Int
    private let objectRefSize: Int
    private let objectCount: Int
    private let topObject: Int
    /// Where the offset table starts, which is where the objects end.
    private let objectsEnd: Int
    /// The containers being read, innermost last: a reference to one of them is a cycle.
    private var open: Set<Int> = []
    private var state: PropertyListEntryState

    private static let headerSize = 8
    private static let trailerSize = 32

    init(_ bytes: [UInt8]) throws(PropertyListReader.Error) {
        self.bytes = bytes
        state = PropertyListEntryState(fileSize: bytes.count)
        let minimum = Self.headerSize + Self.trailerSize
        guard bytes.count >= minimum else {
            throw Error(.file, "a binary property list of \(bytes.count) bytes: too short for the 8-byte header and the 32-byte trailer (\(minimum) bytes)")
        }
        let trailer = bytes.count - Self.trailerSize
        func field(_ offset: Int) -> UInt64 {
            bytes[(trailer + offset)..<(trailer + offset + 8)].reduce(0) { $0 << 8 | UInt64($1) }
        }
        func fail(_ at: Int, _ reason: String) -> Error { Error(.binary(object: nil, offset: trailer + at), "trailer: " + reason) }
        offsetIntSize = Int(bytes[trailer + 6])
        objectRefSize = Int(bytes[trailer + 7])
        guard (1...8).contains(offsetIntSize) else { throw fail(6, "offset size \(offsetIntSize) is not 1 to 8 bytes") }
        guard (1...8).contains(objectRefSize) else { throw fail(7, "object reference size \(objectRefSize) is not 1 to 8 bytes") }
        let count = field(8), top = field(16), table = field(24)
        // The offset table lies between the header and the trailer and holds one offset per object.
        guard table >= UInt64(Self.headerSize + 1), table <= UInt64(trailer) else {
            throw fail(24, "the offset table's offset \(table) is not between the objects (from byte \(Self.headerSize + 1)) and the trailer (byte \(trailer))")
        }
        objectsEnd = Int(table)
        guard count >= 1, count <= UInt64((trailer - objectsEnd) / offsetIntSize) else {
            throw fail(8, "\(count) objects, but the offset table (\(trailer - objectsEnd) bytes from byte \(objectsEnd)) holds \((trailer - objectsEnd) / offsetIntSize) offsets of \(offsetIntSize) bytes")
        }
        objectCount = Int(count)
        guard top < count else { throw fail(16, "the top object \(top) is not one of the \(count) objects") }
        topObject = Int(top)
    }

    mutating func readDictionary() throws(PropertyListReader.Error) -> [PropertyListReader.Entry] {
        let offset = try offset(of: topObject)
        let marker = bytes[offset]
        guard marker >> 4 == 0xD else {
            throw Error(.binary(object: topObject, offset: offset), "the top level is \(Self.kind(marker)), not a dictionary")
        }
        let (count, start) = try count(of: topObject, at: offset, elementSize: 2 * objectRefSize)
        open.insert(topObject)
        var names: Set<String> = []
        var entries: [PropertyListReader.Entry] = []
        for index in 0..<count {
            let key = try reference(at: start + index * objectRefSize, in: topObject)
            let name = try string(key, keyOf: topObject, at: offset)
            guard names.insert(name).inserted else {
                throw Error(.binary(object: topObject, offset: offset), "the dictionary has the key '\(PropertyListReader.describe(name))' twice")
            }
            state.startEntry(name)
            let value = try value(reference(at: start + (count + index) * objectRefSize, in: topObject), depth: 1)
            entries.append(state.entry(name, value))
        }
        return entries
    }

    // MARK: Objects

    /// The value of `object`, at nesting `depth` (an entry's value is at 1).
    private mutating func value(_ object: Int, depth: Int) throws(PropertyListReader.Error) -> PropertyListValue {
        let offset = try offset(of: object)
        func fail(_ reason: String) -> Error { Error(.binary(object: object, offset: offset), reason) }
        guard state.countValue() else { throw fail(state.tooManyValues) }
        let marker = bytes[offset]
        let low = Int(marker & 0x0F)
        switch marker >> 4 {
        case 0x0:
            switch marker {
            case 0x08: return .bool(false)
            case 0x09: return .bool(true)
            case 0x00: throw fail("a null (marker 0x00), not a property-list type")
            case 0x0F: throw fail("a fill byte (marker 0x0F), not an object")
            default: throw fail("marker \(PropertyListReader.hex([marker])) is not a binary property-list object")
            }
        case 0x1:
            guard low <= 4 else { throw fail("an integer of \(1 << min(low, 15)) bytes; integers are 1, 2, 4, 8 or 16 bytes") }
            let size = 1 << low
            try need(size, after: offset, object)
            let field = bytes[(offset + 1)...(offset + size)]
            switch size {
            case 1, 2, 4:
                return .integer(Int(field.reduce(0) { $0 << 8 | UInt64($1) }))
            case 8:
                return .integer(Int(Int64(bitPattern: field.reduce(0) { $0 << 8 | UInt64($1) })))
            default:
                let value = Int128(bitPattern: field.reduce(UInt128(0)) { $0 << 8 | UInt128($1) })
                guard let integer = Int(exactly: value) else {
                    state.skipEntry(PropertyListReader.integerOutOfRange("\(value)"))
                    return .integer(0)
                }
                return .integer(integer)
            }
        case 0x2:
            switch low {
            case 2:
                try need(4, after: offset, object)
                return .real(Double(Float(bitPattern: bigEndian32(at: offset + 1))))
            case 3:
                try need(8, after: offset, object)
                return .real(Double(bitPattern: bigEndian64(at: offset + 1)))
            default:
                throw fail("a real of \(1 << low) bytes; reals are 4 or 8 bytes")
            }
        case 0x3:
            guard marker == 0x33 else { throw fail("marker \(PropertyListReader.hex([marker])) is not a binary property-list object (a date is 0x33)") }
            try need(8, after: offset, object)
            return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: bigEndian64(at: offset + 1))))
        case 0x4:
            let (count, start) = try count(of: object, at: offset, elementSize: 1)
            return .data(Data(bytes[start..<(start + count)]))
        case 0x5, 0x6:
            return .string(try string(object, at: offset))
        case 0x8:
            throw fail("a keyed-archiver UID (marker \(PropertyListReader.hex([marker]))), not a property-list type")
        case 0xA:
            let (count, start) = try count(of: object, at: offset, elementSize: objectRefSize)
            guard state.enterContainer(depth: depth) else { throw fail(state.documentTooDeep) }
            guard open.insert(object).inserted else { throw fail("the array contains itself (a reference cycle)") }
            var values: [PropertyListValue] = []
            values.reserveCapacity(count)
            for index in 0..<count {
                state.path.append(.index(index))
                values.append(try value(reference(at: start + index * objectRefSize, in: object), depth: depth + 1))
                state.path.removeLast()
            }
            open.remove(object)
            return .array(values)
        case 0xC:
            throw fail("a set (marker \(PropertyListReader.hex([marker]))), not a property-list type")
        case 0xD:
            let (count, start) = try count(of: object, at: offset, elementSize: 2 * objectRefSize)
            guard state.enterContainer(depth: depth) else { throw fail(state.documentTooDeep) }
            guard open.insert(object).inserted else { throw fail("the dictionary contains itself (a reference cycle)") }
            var values: [String: PropertyListValue] = [:]
            for index in 0..<count {
                let name = try string(reference(at: start + index * objectRefSize, in: object), keyOf: object, at: offset)
                guard values[name] == nil else { throw fail("the dictionary has the key '\(PropertyListReader.describe(name))' twice") }
                state.path.append(.key(name))
                values[name] = try value(reference(at: start + (count + index) * objectRefSize, in: object), depth: depth + 1)
                state.path.removeLast()
            }
            open.remove(object)
            return .dictionary(values)
        default:
            throw fail("marker \(PropertyListReader.hex([marker])) is not a binary property-list object")
        }
    }

    /// The string `object` (ASCII, marker 0x5n, or UTF-16BE, 0x6n), checked.
    private func string(_ object: Int, at offset: Int) throws(PropertyListReader.Error) -> String {
        func fail(_ reason: String) -> Error { Error(.binary(object: object, offset: offset), reason) }
        let ascii = bytes[offset] >> 4 == 0x5
        let (count, start) = try count(of: object, at: offset, elementSize: ascii ? 1 : 2)
        if ascii {
            let text = bytes[start..<(start + count)]
            if let bad = text.firstIndex(where: { $0 > 0x7F }) {
                throw fail("an ASCII string holds byte \(PropertyListReader.hex([bytes[bad]])) at byte \(bad)")
            }
            return String(decoding: text, as: UTF8.self)
        }
        var units: [UInt16] = []
        units.reserveCapacity(count)
        for index in 0..<count { units.append(UInt16(bytes[start + 2 * index]) << 8 | UInt16(bytes[start + 2 * index + 1])) }
        var index = 0
        while index < units.count {
            let unit = units[index]
            if UTF16.isLeadSurrogate(unit) {
                guard index + 1 < units.count, UTF16.isTrailSurrogate(units[index + 1]) else {
                    throw fail("a UTF-16 string has a lead surrogate 0x\(String(unit, radix: 16, uppercase: true)) without its trail surrogate at byte \(start + 2 * index)")
                }
                index += 2
            } else if UTF16.isTrailSurrogate(unit) {
                throw fail("a UTF-16 string has a trail surrogate 0x\(String(unit, radix: 16, uppercase: true)) without a lead surrogate at byte \(start + 2 * index)")
            } else {
                index += 1
            }
        }
        return String(decoding: units, as: UTF16.self)
    }

    /// The key `object` of the dictionary `dictionary` at `offset`: it must be a string.
    private mutating func string(_ object: Int, keyOf dictionary: Int, at offset: Int) throws(PropertyListReader.Error) -> String {
        let keyOffset = try self.offset(of: object)
        guard bytes[keyOffset] >> 4 == 0x5 || bytes[keyOffset] >> 4 == 0x6 else {
            throw Error(.binary(object: dictionary, offset: offset), "a dictionary key is \(Self.kind(bytes[keyOffset])) (object \(object) at byte \(keyOffset)), not a string")
        }
        guard state.countValue() else { throw Error(.binary(object: object, offset: keyOffset), state.tooManyValues) }
        return try string(object, at: keyOffset)
    }

    // MARK: Fields

    /// Where `object` starts, from the offset table.
    private func offset(of object: Int) throws(PropertyListReader.Error) -> Int {
        let entry = objectsEnd + object * offsetIntSize  // Safe: object < objectCount, whose table fits the file.
        let offset = bytes[entry..<(entry + offsetIntSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard offset >= UInt64(Self.headerSize), offset < UInt64(objectsEnd) else {
            throw Error(.binary(object: nil, offset: entry), "the offset table gives object \(object) the offset \(offset), outside the objects (bytes \(Self.headerSize) to \(objectsEnd - 1))")
        }
        return Int(offset)
    }

    /// The object reference at `position` inside the container `container`.
    private func reference(at position: Int, in container: Int) throws(PropertyListReader.Error) -> Int {
        let reference = bytes[position..<(position + objectRefSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard reference < UInt64(objectCount) else {
            throw Error(.binary(object: nil, offset: position), "object \(container) refers to object \(reference), but there are \(objectCount) objects")
        }
        return Int(reference)
    }

    /// The count of a data, string, array or dictionary object (the marker's low nibble, or the
    /// integer object after it when that is 0xF) and where its content starts; throws unless
    /// `count × elementSize` bytes of content fit before the offset table.
    private func count(of object: Int, at offset: Int, elementSize: Int) throws(PropertyListReader.Error) -> (count: Int, start: Int) {
        func fail(_ reason: String) -> Error { Error(.binary(object: object, offset: offset), reason) }
        var count = UInt64(bytes[offset] & 0x0F)
        var start = offset + 1
        if count == 0xF {
            try need(1, after: offset, object)
            let marker = bytes[offset + 1]
            guard marker >> 4 == 0x1, marker & 0x0F <= 3 else {
                throw fail("the count after marker \(PropertyListReader.hex([bytes[offset]])) is not an integer of 1 to 8 bytes (marker \(PropertyListReader.hex([marker])))")
            }
            let size = 1 << Int(marker & 0x0F)
            try need(1 + size, after: offset, object)
            count = bytes[(offset + 2)..<(offset + 2 + size)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard size < 8 || count <= UInt64(Int64.max) else { throw fail("a negative count \(Int64(bitPattern: count))") }
            start = offset + 2 + size
        }
        let room = objectsEnd - start
        guard count <= UInt64(room / elementSize) else {
            throw fail("\(Self.kind(bytes[offset])) of \(count) \(elementSize == 1 ? "bytes" : "elements") does not fit in the \(max(room, 0)) bytes before the offset table")
        }
        return (Int(count), start)
    }

    /// Throws unless `size` bytes follow the marker at `offset` before the offset table.
    private func need(_ size: Int, after offset: Int, _ object: Int) throws(PropertyListReader.Error) {
        guard size <= objectsEnd - offset - 1 else {
            throw Error(.binary(object: object, offset: offset), "\(Self.kind(bytes[offset])) needs \(size) bytes after its marker, but the objects end \(objectsEnd - offset - 1) bytes later")
        }
    }

    private func bigEndian32(at offset: Int) -> UInt32 {
        bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    private func bigEndian64(at offset: Int) -> UInt64 {
        bytes[offset..<(offset + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// What a marker announces, for a message: "an array", "a string", …
    static func kind(_ marker: UInt8) -> String {
        switch marker >> 4 {
        case 0x0: marker == 0x08 || marker == 0x09 ? "a boolean" : "marker \(PropertyListReader.hex([marker]))"
        case 0x1: "an integer"
        case 0x2: "a real"
        case 0x3: "a date"
        case 0x4: "data"
        case 0x5, 0x6: "a string"
        case 0x8: "a keyed-archiver UID"
        case 0xA: "an array"
        case 0xC: "a set"
        case 0xD: "a dictionary"
        default: "marker \(PropertyListReader.hex([marker]))"
        }
    }
}
