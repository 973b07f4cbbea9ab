/// The encoder's name table: each record's field names, numbered in order of first use.
///
/// Names are looked up once per field written, so this is on the hot path. The names an encoder
/// sees are nearly always the same few coding keys, so it remembers them across records: a
/// persistent table gives each distinct name a global number, and a record only maps global
/// numbers to its own indices (a generation counter makes starting a record O(1)). In front of the
/// hashing, a small direct-mapped cache recognizes a name by the bits of its `String` value.
struct ObjectNameTable {
    /// One remembered name.
    private struct Global {
        var name: String
        /// The record this name was last used in, and its index there.
        var generation: UInt32 = 0
        var index: Int = 0
    }

    /// A cache slot: the two words of a `String` value and its global number.
    private struct Recent {
        var bits: (UInt64, UInt64) = (0, 0)
        var global = -1
    }

    private var globals: [Global] = []
    private var byName: [String: Int] = [:]
    private var recent = [Recent](repeating: Recent(), count: 64)
    private var generation: UInt32 = 0
    /// The global numbers of this record's names, in index order.
    private var record: [Int] = []

    /// Remembered names beyond this are forgotten before the next record (records full of distinct
    /// dictionary keys would otherwise grow the table without bound).
    static let rememberLimit = 4096

    mutating func startRecord() {
        record.removeAll(keepingCapacity: true)
        if globals.count > Self.rememberLimit || generation == .max {
            globals.removeAll()
            byName.removeAll()
            recent = [Recent](repeating: Recent(), count: 64)
            generation = 0
        }
        generation += 1
    }

    /// The index of `name` in this record's table, adding it on first use.
    @inline(__always)
    mutating func index(of name: String) -> Int {
        let global = globalNumber(of: name)
        if globals[global].generation == generation { return globals[global].index }
        globals[global].generation = generation
        globals[global].index = record.count
        record.append(global)
        return record.count - 1
    }

    @inline(__always)
    private mutating func globalNumber(of name: String) -> Int {
        // Two `String` values with the same bits hold the same characters: a small string keeps them
        // in those bits, a large one points at storage that cannot change while `globals` holds a
        // reference to it (a uniquely referenced string could be mutated in place; this one is not
        // unique). Different bits say nothing, so a miss falls back to hashing.
        let bits = unsafeBitCast(name, to: (UInt64, UInt64).self)  // Safe: String is two words; only its bits are read.
        let slot = Int(truncatingIfNeeded: ((bits.0 ^ (bits.1 &* 0x9E37_79B9_7F4A_7C15)) &* 0xBF58_476D_1CE4_E5B9) >> 58)
        if recent[slot].global >= 0, recent[slot].bits == bits { return recent[slot].global }
        let global: Int
        if let known = byName[name] {
            global = known
        } else {
            global = globals.count
            globals.append(Global(name: name))
            byName[name] = global
        }
        // Remember the bits of the string `globals` holds, whose storage it keeps alive.
        recent[slot] = Recent(bits: unsafeBitCast(globals[global].name, to: (UInt64, UInt64).self), global: global)
        return global
    }

    /// Appends the record's name table: the count, then each name as a varint length and UTF-8.
    func writeTable(into writer: inout ObjectWriter) {
        writer.append(varint: UInt64(record.count))
        for global in record {
            var name = globals[global].name
            name.withUTF8 { utf8 in
                writer.append(varint: UInt64(utf8.count))
                writer.append(UnsafeRawBufferPointer(utf8))
            }
        }
    }
}
