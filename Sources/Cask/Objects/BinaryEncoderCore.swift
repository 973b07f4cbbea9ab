import Foundation

/// The state of one binary encoding: the output, the open containers, the name table.
///
/// Encoding streams: each value is written where it belongs the moment it is encoded, with no
/// intermediate tree. A container's length is not known when it starts, so its tag byte is a
/// placeholder, fixed when the container is closed — by the next write into an enclosing container,
/// or at the end. A container left open by a value is closed lazily the same way, which is what lets
/// synthesized `encode(to:)` implementations (and class hierarchies calling `super.encode(to:)`)
/// stream. Writing into a container that an enclosing write already closed — interleaving two
/// sibling containers — cannot stream; it fails with an `EncodingError` naming the coding path.
///
/// Not thread-safe: one encoding at a time.
final class BinaryEncoderCore {
    /// An open container.
    struct Frame {
        var id: UInt32
        /// The offset of its placeholder tag byte.
        var start: Int
        var major: ObjectFormat.Major
        /// Elements or fields written so far.
        var count: Int
    }

    /// Where a value handed to `encode(to:)` goes, and what it has written there.
    struct Slot {
        enum Content {
            case nothing
            case single
            case container(frameID: UInt32, depth: Int, major: ObjectFormat.Major)
        }

        var id: UInt32
        /// Where the value starts.
        var position: Int
        /// How many containers are open when the value starts (its parent is the last).
        var frameCount: Int
        var pathCount: Int
        /// A `superEncoder` slot starts with a null (so that an unused one still leaves a valid
        /// field); the value replaces it.
        var placeholder: Bool
        var content: Content
    }

    // The properties are touched by this encoding only, never from two threads and never with an
    // access held across a call out to a model's `encode(to:)`; dynamic exclusivity checks would
    // only cost time.
    @exclusivity(unchecked) var writer = ObjectWriter()
    @exclusivity(unchecked) var frames: [Frame] = []
    @exclusivity(unchecked) var slots: [Slot] = []
    @exclusivity(unchecked) var path: [any CodingKey] = []
    @exclusivity(unchecked) var names = ObjectNameTable()
    @exclusivity(unchecked) var nextID: UInt32 = 0
    /// The first misuse found where the protocol gives no way to throw (e.g. `container(keyedBy:)`);
    /// the encoding fails with it.
    @exclusivity(unchecked) var failure: EncodingError?
    /// `failure != nil`, cheaper to test (EncodingError is a resilient type).
    @exclusivity(unchecked) var failed = false
    /// The keys of `superEncoder` slots, by slot id, for their coding paths.
    @exclusivity(unchecked) var superKeys: [UInt32: any CodingKey] = [:]
    var userInfo: [CodingUserInfoKey: Any] = [:]

    /// Buffers that grew past this for one large value give the memory back before the next.
    static let retainedCapacity = 1 << 20

    // MARK: Whole values

    /// Encodes `value` into `writer`: the version byte, the root value, the name table.
    func encode<T: Encodable>(_ value: T) throws {
        reset()
        writer.append(ObjectFormat.version)
        try encodeValue(value, key: nil)
        if failed { throw failure! }
        closeFrames(downTo: 0)
        names.writeTable(into: &writer)
    }

    func reset() {
        writer.reset(keepingCapacityUpTo: Self.retainedCapacity)
        frames.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
        path.removeAll(keepingCapacity: true)
        names.startRecord()
        failure = nil
        failed = false
        if !superKeys.isEmpty { superKeys.removeAll() }
    }

    // MARK: Values

    /// Writes `value` at the current position (after its field id or as the next element).
    @inline(__always)
    func encodeValue<T: Encodable>(_ value: T, key: (any CodingKey)?) throws {
        if writePrimitive(value) { return }
        try encodeComposite(value, key: key)
    }

    /// Hands the value a slot and lets it encode itself.
    func encodeComposite<T: Encodable>(_ value: T, key: (any CodingKey)?) throws {
        // An array of any other Encodable: its elements written here, as `Array.encode(to:)` would
        // write them, without its unkeyed container (an existential box) and the protocol calls.
        // An array is one word: the size test spares other types the conformance lookup.
        if MemoryLayout<T>.size == MemoryLayout<[Int]>.size, let array = T.self as? any ObjectEncodableArray.Type {
            return try encodeArray(value, as: array, key: key)
        }
        let pathCount = path.count
        if let key { path.append(key) }
        nextID &+= 1  // Safe: ids only need to differ among live slots and frames; wrapping is harmless.
        let id = nextID
        let index = slots.count
        slots.append(Slot(id: id, position: writer.count, frameCount: frames.count, pathCount: path.count, placeholder: false, content: .nothing))
        defer {
            while slots.count > index { slots.removeLast() }  // this slot, and any superEncoder slots made inside
            while path.count > pathCount { path.removeLast() }
        }
        try value.encode(to: BinaryEncoderSlot(core: self, index: index, id: id))
        if failed { throw failure! }
        if case .nothing = slots[index].content {
            // A value that encoded nothing reads back as an empty keyed container, as in JSON.
            writer.append(ObjectFormat.emptyObject)
        }
    }

    /// `A` is `T` (an array type found by ``encodeComposite(_:key:)``).
    private func encodeArray<T, A: ObjectEncodableArray>(_ value: T, as array: A.Type, key: (any CodingKey)?) throws {
        try unsafeBitCast(value, to: A.self).encodeElements(self, key: key)  // Safe: A is T, cast by the caller.
    }

    /// An unkeyed container of `elements`, each under its index on the coding path, opened and
    /// closed here: the bytes `Array.encode(to:)` writes through a slot.
    func encodeElements<Element: Encodable>(_ elements: [Element], key: (any CodingKey)?) throws {
        let pathCount = path.count
        if let key { path.append(key) }
        defer { while path.count > pathCount { path.removeLast() } }
        guard let frame = startFrame(.array, codingPath: path) else { throw failure! }
        // An index loop: unspecialized, `enumerated()` costs a metadata lookup per element.
        var index = 0
        while index < elements.count {
            // An element's containers are closed lazily: close them before the next element.
            if frames.count > frame.depth + 1 { closeFrames(downTo: frame.depth + 1) }
            frames[frame.depth].count += 1
            try encodeValue(elements[index], key: ObjectIndexKey(index))
            index += 1
        }
        if failed { throw failure! }
        closeFrames(downTo: frame.depth)
    }

    /// Runs `body` with `extra` (the keys of nested containers) on the coding path.
    func withExtraPath(_ extra: [any CodingKey], _ body: () throws -> Void) throws {
        let count = path.count
        path.append(contentsOf: extra)
        defer { path.removeSubrange(count...) }
        try body()
    }

    /// Writes the types with a representation of their own; false for everything else.
    @inline(__always)
    func writePrimitive<T: Encodable>(_ value: T) -> Bool {
        // Safe (every unsafeBitCast below): T is exactly the type it is cast to.
        if T.self == String.self { writeString(unsafeBitCast(value, to: String.self)) }
        else if T.self == Int.self { writeSigned(Int64(unsafeBitCast(value, to: Int.self))) }
        else if T.self == Double.self { writeDouble(unsafeBitCast(value, to: Double.self)) }
        else if T.self == Bool.self { writeBool(unsafeBitCast(value, to: Bool.self)) }
        else { return writeOtherPrimitive(value) }
        return true
    }

    func writeOtherPrimitive<T: Encodable>(_ value: T) -> Bool {
        // Safe (every unsafeBitCast below): T is exactly the type it is cast to.
        if T.self == Int64.self { writeSigned(unsafeBitCast(value, to: Int64.self)) }
        else if T.self == UInt64.self { writeUnsigned(unsafeBitCast(value, to: UInt64.self)) }
        else if T.self == Int32.self { writeSigned(Int64(unsafeBitCast(value, to: Int32.self))) }
        else if T.self == UInt32.self { writeUnsigned(UInt64(unsafeBitCast(value, to: UInt32.self))) }
        else if T.self == Int16.self { writeSigned(Int64(unsafeBitCast(value, to: Int16.self))) }
        else if T.self == UInt16.self { writeUnsigned(UInt64(unsafeBitCast(value, to: UInt16.self))) }
        else if T.self == Int8.self { writeSigned(Int64(unsafeBitCast(value, to: Int8.self))) }
        else if T.self == UInt8.self { writeUnsigned(UInt64(unsafeBitCast(value, to: UInt8.self))) }
        else if T.self == UInt.self { writeUnsigned(UInt64(unsafeBitCast(value, to: UInt.self))) }
        else if T.self == Float.self { writeFloat(unsafeBitCast(value, to: Float.self)) }
        else if T.self == Date.self { writeDouble(unsafeBitCast(value, to: Date.self).timeIntervalSinceReferenceDate) }
        else if T.self == Data.self { writeBytes(unsafeBitCast(value, to: Data.self)) }
        else if T.self == [UInt8].self { writeBytes(unsafeBitCast(value, to: [UInt8].self)) }
        else if T.self == UUID.self { writeUUID(unsafeBitCast(value, to: UUID.self)) }
        else if T.self == URL.self { writeString(unsafeBitCast(value, to: URL.self).absoluteString) }
        else if T.self == Decimal.self { writeString(unsafeBitCast(value, to: Decimal.self).description) }
        else if T.self == Int128.self { writeSigned128(unsafeBitCast(value, to: Int128.self)) }
        else if T.self == UInt128.self { writeUnsigned128(unsafeBitCast(value, to: UInt128.self)) }
        // Common arrays, written as Array.encode(to:) would write them, minus the protocol calls.
        else if T.self == [String].self { writeArray(unsafeBitCast(value, to: [String].self)) { $0.writeString($1) } }
        else if T.self == [Int].self { writeArray(unsafeBitCast(value, to: [Int].self)) { $0.writeSigned(Int64($1)) } }
        else if T.self == [Double].self { writeArray(unsafeBitCast(value, to: [Double].self)) { $0.writeDouble($1) } }
        else { return false }
        return true
    }

    /// An unkeyed container of `elements`, opened and closed here (a failure is recorded in `failure`).
    @inline(__always)
    func writeArray<Element>(_ elements: [Element], _ write: (BinaryEncoderCore, Element) -> Void) {
        guard let frame = startFrame(.array, codingPath: path) else { return }
        for element in elements { write(self, element) }
        closeFrames(downTo: frame.depth)
    }

    @inline(__always) func writeNull() { writer.append(ObjectFormat.Simple.null.rawValue) }

    @inline(__always) func writeBool(_ value: Bool) {
        writer.append(value ? ObjectFormat.Simple.true.rawValue : ObjectFormat.Simple.false.rawValue)
    }

    @inline(__always) func writeSigned(_ value: Int64) {
        if value >= 0 {
            writer.append(major: .unsigned, UInt64(value))
        } else {
            writer.append(major: .negative, UInt64(~value))  // -1 − value, which is >= 0
        }
    }

    @inline(__always) func writeUnsigned(_ value: UInt64) {
        writer.append(major: .unsigned, value)
    }

    func writeSigned128(_ value: Int128) {
        if let small = Int64(exactly: value) { return writeSigned(small) }
        if let unsigned = UInt64(exactly: value) { return writeUnsigned(unsigned) }
        if value > 0 {
            writer.append(ObjectFormat.Simple.bigUnsigned.rawValue)
            writer.append(littleEndian: UInt128(value))
        } else {
            writer.append(ObjectFormat.Simple.bigNegative.rawValue)
            writer.append(littleEndian: UInt128(~value))
        }
    }

    func writeUnsigned128(_ value: UInt128) {
        if let small = UInt64(exactly: value) { return writeUnsigned(small) }
        writer.append(ObjectFormat.Simple.bigUnsigned.rawValue)
        writer.append(littleEndian: value)
    }

    @inline(__always) func writeDouble(_ value: Double) {
        writer.append(ObjectFormat.Simple.float64.rawValue)
        writer.append(littleEndian: value.bitPattern)
    }

    @inline(__always) func writeFloat(_ value: Float) {
        writer.append(ObjectFormat.Simple.float32.rawValue)
        writer.append(littleEndian: value.bitPattern)
    }

    @inline(__always) func writeString(_ value: String) {
        writer.append(major: .string, utf8: value)
    }

    func writeBytes(_ value: some Collection<UInt8>) {
        writer.append(major: .bytes, UInt64(value.count))
        if value.withContiguousStorageIfAvailable({ writer.append(UnsafeRawBufferPointer($0)) }) == nil {
            for byte in value { writer.append(byte) }
        }
    }

    func writeUUID(_ value: UUID) {
        writer.append(ObjectFormat.Simple.uuid.rawValue)
        withUnsafeBytes(of: value.uuid) { writer.append($0) }
    }

    // MARK: Keys

    @inline(__always)
    func writeFieldID(_ key: some CodingKey) {
        if let int = key.objectIntegerKey {
            writer.append(varint: ObjectFormat.fieldID(intKey: int))
        } else {
            writer.append(varint: ObjectFormat.fieldID(nameIndex: names.index(of: key.stringValue)))
        }
    }

    // MARK: Containers

    /// Closes every container above `depth` (the innermost first), fixing their tags.
    @inline(__always)
    func closeFrames(downTo count: Int) {
        while frames.count > count { closeInnermost() }
    }

    func closeInnermost() {
        let frame = frames.removeLast()
        let size = writer.count - frame.start - 1
        let major = frame.major.rawValue << 5
        if size < Int(ObjectFormat.immediateLimit) {
            writer.set(major | UInt8(size), at: frame.start)
        } else {
            writer.set(major | ObjectFormat.varintArgument, at: frame.start)
            writer.insert(varint: UInt64(size) - ObjectFormat.immediateLimit, at: frame.start + 1)
        }
    }

    /// Makes the container `(id, depth)` the innermost open one before a write into it.
    @inline(__always)
    func prepareWrite(frame id: UInt32, depth: Int, codingPath: @autoclosure () -> [any CodingKey]) throws {
        guard depth < frames.count, frames[depth].id == id else {
            throw fail("a container was written to after a value outside it was encoded; Cask's binary coder writes containers in order, so encode one nested container completely before the next", codingPath())
        }
        if frames.count > depth + 1 { closeFrames(downTo: depth + 1) }
        frames[depth].count += 1
    }

    /// Starts a container at the current position (a nested container, or a slot's).
    func startFrame(_ major: ObjectFormat.Major, codingPath: @autoclosure () -> [any CodingKey]) -> (id: UInt32, depth: Int)? {
        guard frames.count < ObjectFormat.maxDepth else {
            failQuietly("containers are nested more than \(ObjectFormat.maxDepth) deep", codingPath())
            return nil
        }
        nextID &+= 1  // Safe: see encodeComposite.
        frames.append(Frame(id: nextID, start: writer.count, major: major, count: 0))
        writer.append(major.rawValue << 5)  // a placeholder until the container is closed
        return (nextID, frames.count - 1)
    }

    /// The container a slot's value asked for: started on the first request, the same one again on
    /// later requests (a subclass encoding into the container its superclass started).
    func container(forSlot index: Int, id: UInt32, major: ObjectFormat.Major) -> (id: UInt32, depth: Int)? {
        guard index < slots.count, slots[index].id == id else {
            failQuietly("an encoder was used after the encode(to:) call it was passed to had returned", path)
            return nil
        }
        switch slots[index].content {
        case .container(let frameID, let depth, let existing):
            guard existing == major else {
                failQuietly("a value asked for a keyed and an unkeyed container at once", codingPath(ofSlot: index))
                return nil
            }
            guard depth < frames.count, frames[depth].id == frameID else {
                failQuietly("a value asked for its container again after values outside it were encoded", codingPath(ofSlot: index))
                return nil
            }
            closeFrames(downTo: depth + 1)
            return (frameID, depth)
        case .single:
            failQuietly("a value asked for a container after encoding a single value", codingPath(ofSlot: index))
            return nil
        case .nothing:
            guard claim(slot: index) else { return nil }
            guard let frame = startFrame(major, codingPath: self.codingPath(ofSlot: index)) else { return nil }
            slots[index].content = .container(frameID: frame.id, depth: frame.depth, major: major)
            return frame
        }
    }

    /// Checks that nothing was written since the slot was made, so its value can go there.
    func claim(slot index: Int) -> Bool {
        let placeholder = slots[index].placeholder
        guard writer.count == slots[index].position + (placeholder ? 1 : 0), frames.count == slots[index].frameCount else {
            failQuietly("a value was encoded through an encoder after other values were written (superEncoder() must be used before the next value of its container)", codingPath(ofSlot: index))
            return false
        }
        if placeholder {
            writer.removeLast(1)
            slots[index].placeholder = false
        }
        return true
    }

    /// Prepares a single-value write into a slot.
    func beginSingleValue(slot index: Int, id: UInt32) throws {
        guard index < slots.count, slots[index].id == id else {
            throw fail("an encoder was used after the encode(to:) call it was passed to had returned", path)
        }
        guard case .nothing = slots[index].content else {
            throw fail("a single value container was asked to encode a second value", codingPath(ofSlot: index))
        }
        guard claim(slot: index) else { throw failure! }
        slots[index].content = .single
    }

    /// A slot for `superEncoder()`: a null in the container now, replaced by the value if one is encoded.
    func makeSuperSlot(key: any CodingKey, pathCount: Int) -> (index: Int, id: UInt32) {
        writeNull()
        nextID &+= 1  // Safe: see encodeComposite.
        slots.append(Slot(id: nextID, position: writer.count - 1, frameCount: frames.count, pathCount: pathCount, placeholder: true, content: .nothing))
        superKeys[nextID] = key
        return (slots.count - 1, nextID)
    }

    func codingPath(ofSlot index: Int) -> [any CodingKey] {
        var codingPath = Array(path.prefix(slots[index].pathCount))
        if !superKeys.isEmpty, let key = superKeys[slots[index].id] { codingPath.append(key) }
        return codingPath
    }

    // MARK: Failures

    /// Records a misuse (the first one wins) and returns the error to throw.
    func fail(_ message: String, _ codingPath: [any CodingKey]) -> EncodingError {
        let error = EncodingError.invalidValue((), EncodingError.Context(codingPath: codingPath, debugDescription: message))
        if failure == nil {
            failure = error
            failed = true
        }
        return failure!
    }

    func failQuietly(_ message: String, _ codingPath: [any CodingKey]) {
        _ = fail(message, codingPath)
    }
}

/// Arrays whose elements the encoder writes itself (``BinaryEncoderCore/encodeElements(_:key:)``).
protocol ObjectEncodableArray {
    func encodeElements(_ core: BinaryEncoderCore, key: (any CodingKey)?) throws
}

extension Array: ObjectEncodableArray where Element: Encodable {
    func encodeElements(_ core: BinaryEncoderCore, key: (any CodingKey)?) throws {
        try core.encodeElements(self, key: key)
    }
}
