import CCaskCPU

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): with the CPU's instruction where there
/// is one (x86-64 SSE4.2, AArch64 CRC), else computed slicing-by-8.
///
/// The same checksum as iSCSI, ext4 metadata and LevelDB. `CRC32C.checksum(of: "123456789")`
/// is `0xE3069283`. Thread-safe: the tables are immutable.
package enum CRC32C {
    /// Whether ``checksum(of:continuing:)`` uses the CPU's instruction: about 3 times as fast as
    /// the tables on a 100-byte record.
    package static let usesHardware = cask_crc32c_hardware_available() != 0

    /// Eight 256-entry tables; table 0 is the classic byte-at-a-time table.
    /// Allocated once for the life of the process and never written after initialization.
    nonisolated(unsafe) private static let table: UnsafePointer<UInt32> = {
        let tables = UnsafeMutablePointer<UInt32>.allocate(capacity: 8 * 256)
        tables.initialize(repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[byte] = crc
        }
        for byte in 0..<256 {
            var crc = tables[byte]
            for slice in 1..<8 {
                crc = (crc >> 8) ^ tables[Int(crc & 0xFF)]
                tables[slice * 256 + byte] = crc
            }
        }
        return UnsafePointer(tables)
    }()

    /// The CRC-32C of `bytes`, continuing from a previous checksum `crc` (0 to start).
    package static func checksum(of bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        #if FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        // Fuzzing builds (Tools/fuzz.sh) checksum nothing, so that mutated inputs get past the
        // checksums to the parsers behind them; their seed corpus is written by the same build.
        return 0
        #endif
        return hardwareChecksum(of: bytes, continuing: crc) ?? softwareChecksum(of: bytes, continuing: crc)
    }

    /// The same checksum with the CPU's instruction; nil when the CPU has none.
    @inline(__always)
    package static func hardwareChecksum(of bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32? {
        guard usesHardware else { return nil }
        guard let base = bytes.baseAddress else { return crc }
        return ~cask_crc32c_hardware(~crc, base, bytes.count)
    }

    /// The same checksum from the tables, whatever the CPU.
    package static func softwareChecksum(of bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        do {
            let table = Self.table
            var crc = ~crc
            var index = 0
            let count = bytes.count
            guard let base = bytes.baseAddress else { return ~crc }
            while count - index >= 8 {
                // Safe: index + 8 <= count, so the unaligned 8-byte load stays inside `bytes`.
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self)) ^ UInt64(crc)
                crc = table[7 * 256 + Int(word & 0xFF)]
                    ^ table[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((word >> 16) & 0xFF)]
                    ^ table[4 * 256 + Int((word >> 24) & 0xFF)]
                    ^ table[3 * 256 + Int((word >> 32) & 0xFF)]
                    ^ table[2 * 256 + Int((word >> 40) & 0xFF)]
                    ^ table[1 * 256 + Int((word >> 48) & 0xFF)]
                    ^ table[Int(word >> 56)]
                index &+= 8  // Safe: bounded by count.
            }
            while index < count {
                crc = (crc >> 8) ^ table[Int((crc ^ UInt32(base.load(fromByteOffset: index, as: UInt8.self))) & 0xFF)]
                index &+= 1  // Safe: bounded by count.
            }
            return ~crc
        }
    }

    package static func checksum(of bytes: some Sequence<UInt8>) -> UInt32 {
        let array = Array(bytes)
        return array.withUnsafeBytes { checksum(of: $0) }
    }
}
