import Foundation

/// A store directory serialized into one fuzz input, and back.
///
/// An image is a run of entries, each `kind: u8, id: u8, length: u16 LE, bytes[length]`
/// (a last entry shorter than its length keeps what is there). `kind % 4` names the file:
/// 0 the segment `id % 8 + 1`, 1 its hint file, 2 the `COMPACTION` manifest (or, with `id` ≥ 128,
/// the dictionary `id % 8 + 1`; with `id` in 64 ..< 128, the `ENCRYPTION` file of an encrypted
/// store), 3 a leftover `.tmp` of that segment. A later entry for the same file replaces an
/// earlier one. (Each range was added without changing what the earlier inputs mean.)
enum StoreImage {
    static func files(in image: UnsafeRawBufferPointer) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        var offset = 0
        while image.count - offset >= 4 {
            let kind = image[offset] % 4
            let idByte = image[offset + 1]
            let length = Int(image[offset + 2]) | Int(image[offset + 3]) << 8
            offset += 4
            let end = min(image.count, offset + length)
            let bytes = Array(image[offset..<end])
            offset = end
            files[name(kind: kind, idByte: idByte)] = bytes
        }
        return files
    }

    /// The image of the store files in `directory` (the lock file and unknown names left out).
    static func image(ofDirectory directory: String) throws -> [UInt8] {
        var image: [UInt8] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: directory).sorted() {
            guard let (kind, id) = entry(forName: name) else {
                precondition(name == SegmentName.lockFile, "\(name) has no place in a fuzz image")
                continue
            }
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
            precondition(bytes.count <= Int(UInt16.max), "\(name) is too big for a fuzz image")
            image += [kind, id, UInt8(bytes.count & 0xFF), UInt8(bytes.count >> 8)] + bytes
        }
        return image
    }

    /// Writes `files` into `directory`, which is emptied first.
    static func materialize(_ files: [String: [UInt8]], in directory: String) {
        let manager = FileManager.default
        try? manager.removeItem(atPath: directory)
        try! manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, bytes) in files {
            precondition(manager.createFile(atPath: directory + "/" + name, contents: Data(bytes)))
        }
    }

    private static func name(kind: UInt8, idByte: UInt8) -> String {
        let id = UInt64(idByte % 8) + 1
        switch kind {
        case 0: return SegmentName.segment(id)
        case 1: return SegmentName.hint(id)
        case 2: return idByte >= 128 ? SegmentName.dictionary(id) : idByte >= 64 ? EncryptionFile.fileName : CompactionManifest.fileName
        default: return SegmentName.segment(id) + ".tmp"
        }
    }

    /// The kind and id byte of a file's entry.
    private static func entry(forName name: String) -> (UInt8, UInt8)? {
        if name == EncryptionFile.fileName { return (2, 64) }
        for idByte in [UInt8](0..<8) + [UInt8](128..<136) {
            for kind in UInt8(0)...3 where self.name(kind: kind, idByte: idByte) == name {
                return (kind, kind == 2 && idByte < 128 ? 0 : idByte)
            }
        }
        return nil
    }
}
