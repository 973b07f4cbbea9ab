import Foundation

// libFuzzer target: arbitrary bytes as an LZ4 block for the read path's expander. The first two
// bytes give the size to expand to (their low 11 bits: 0 ... 2047) and, in the top bit, whether the
// block was compressed against a dictionary (a fixed 4 KiB one, `dictionary`); the rest is the
// block. The expander writes into a buffer of exactly that size (the address sanitizer catches a
// byte outside it, and reads outside the dictionary) and may refuse any block, but what it accepts
// liblz4 must accept too and expand to the same bytes.
// Built and run by Tools/fuzz.sh.

enum LZ4ExpanderFuzzer {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 2 else { return }
        let count = (Int(bytes[0]) | Int(bytes[1]) << 8) & 0x7FF
        let usesDictionary = bytes[1] & 0x80 != 0
        let block = UnsafeRawBufferPointer(rebasing: bytes[2...])
        let ours = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
        let theirs = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
        defer {
            ours.deallocate()
            theirs.deallocate()
        }
        let content = usesDictionary ? dictionary.content : nil
        guard LZ4BlockExpander.expand(block, into: ours, dictionary: content) else { return }
        let accepted = content.map { LZ4Decompressor.decompress(block, into: theirs, dictionary: $0) } ?? LZ4Decompressor.decompress(block, into: theirs)
        guard accepted else {
            fatalError("the expander accepted a block liblz4 rejects (\(block.count) bytes, \(count) out)")
        }
        if count > 0 && memcmp(ours.baseAddress!, theirs.baseAddress!, count) != 0 {
            fatalError("the expander and liblz4 expand a block differently (\(block.count) bytes, \(count) out)")
        }
    }

    /// The dictionary of blocks whose size word has its top bit set: words a store's values share.
    static let dictionary: LZ4Dictionary = {
        var content: [UInt8] = []
        var n: UInt32 = 1
        let words = ["\"name\":", "\"email\":", "@example.com", "\"id\":", "segment", "record", "cask ", "{\"", "\"}", ", "]
        while content.count < 4096 {
            n = n &* 1_103_515_245 &+ 12_345
            content += Array(words[Int(n >> 16) % words.count].utf8)
        }
        return content.prefix(4096).withUnsafeBytes { LZ4Dictionary(content: $0) }
    }()

    /// Blocks liblz4 wrote for values of the shapes a store holds, each behind its size; and some
    /// compressed against the dictionary.
    static func writeSeeds(to seeds: String) throws {
        let values: [(String, [UInt8])] = [
            ("half-random", (0..<50).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 13) } + [UInt8](repeating: 0x61, count: 50)),
            ("run", [UInt8](repeating: 0, count: 300)),
            ("text", Array(String(repeating: "{\"name\": \"cask\", \"id\": 12} ", count: 20).utf8)),
            ("period-3", (0..<200).map { UInt8($0 % 3) }),
        ]
        let compressor = LZ4Compressor()
        for (name, value) in values {
            var block = [UInt8](repeating: 0, count: LZ4Compressor.bound(value.count))
            let written = value.withUnsafeBytes { source in block.withUnsafeMutableBytes { compressor.compress(source, into: $0) } }
            guard let written else { continue }
            let seed = [UInt8(value.count & 0xFF), UInt8(value.count >> 8)] + block.prefix(written)
            try Data(seed).write(to: URL(fileURLWithPath: seeds + "/" + name))
        }
        let profiles: [(String, [UInt8])] = [
            ("dictionary-profile", Array(#"{"name":"ada","email":"ada@example.com","id":12}"#.utf8)),
            ("dictionary-record", Array("segment record cask segment record cask {\"id\": 4}".utf8)),
        ]
        for (name, value) in profiles {
            var block = [UInt8](repeating: 0, count: LZ4Compressor.bound(value.count))
            let written = value.withUnsafeBytes { source in block.withUnsafeMutableBytes { compressor.compress(source, into: $0, dictionary: dictionary) } }
            guard let written else { continue }
            let seed = [UInt8(value.count & 0xFF), UInt8(value.count >> 8) | 0x80] + block.prefix(written)
            try Data(seed).write(to: URL(fileURLWithPath: seeds + "/" + name))
        }
    }
}
