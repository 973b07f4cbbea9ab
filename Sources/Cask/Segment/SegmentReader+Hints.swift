#if canImport(Glibc)
import Glibc
#endif

/// Reading a segment's hint file: the one place its bytes are read from disk, bounded and judged
/// before any reader — the open, `verify`, repair — parses them (FORMAT.md, "Hint files").
extension SegmentReader {
    /// A hint file's bytes, or why they cannot be used.
    package enum HintRead {
        case read([UInt8])
        case unusable(InvalidHint)
    }

    /// The bytes of segment `segmentID`'s hint file at `hintPath`, or why they cannot be used.
    ///
    /// A hint file is read whole only when its size is possible: at least its header, and at most
    /// twice the bytes it can describe plus one block — the segment's `segmentLength`, or more when
    /// its header (checksum valid, naming this segment) declares more, as after a lost tail (then
    /// its entries past the segment's end name the records lost: ``lostTail(segmentID:path:segmentLength:hint:)``).
    /// A crafted header cannot make the read unbounded: the declared length is capped at 4 GiB.
    /// A reader that has no use for the entries past the end (the open: such a hint is refused,
    /// and its header alone names the lost tail) passes `beyondSegment: false`, and then a hint that
    /// declares more than `segmentLength` is refused from its header, its body never read.
    /// `sealing`: an encrypted store's, for the segment (its header declares a length only when its
    /// tag holds).
    package static func readHint(
        of segmentID: UInt64, segmentLength: Int64, at hintPath: String, beyondSegment: Bool = true, sealing: HintFile.Sealing?,
        fileSystem: any FileSystem
    ) -> HintRead {
        func invalid(_ reason: String) -> HintRead {
            .unusable(InvalidHint(file: hintPath, segmentID: segmentID, reason: reason))
        }
        let file: OpenFile
        do { file = try fileSystem.openFile(hintPath, flags: O_RDONLY, mode: 0) } catch { return invalid("cannot open: \(error)") }
        let size: Int64
        do { size = try fileSystem.fileSize(file.descriptor) } catch { return invalid("cannot stat: \(error)") }
        var header = [UInt8](repeating: 0, count: HintFile.maxHeaderLength)
        let headerRead = (try? header.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }) ?? 0
        let declared = declaredLength(ofHint: Array(header[0..<headerRead]), segmentID: segmentID, sealing: sealing)
        if !beyondSegment, let declared, declared > segmentLength {
            return invalid("it describes \(declared) bytes of a segment of \(segmentLength)")
        }
        let described = max(segmentLength, declared ?? 0)
        guard size >= Int64(HintFile.headerLength), size <= 2 * described + Int64(HintFile.maxBlockLength) else {
            return invalid("hint file is \(size) bytes, impossible for a segment of \(segmentLength) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        do {
            let read = try bytes.withMutableBytes { (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }
            guard read == Int(size) else { return invalid("file shrank while it was read") }
        } catch {
            return invalid("cannot read: \(error)")
        }
        return .read(bytes)
    }

    /// Why a hint file whose bytes ``HintFile`` refused cannot be used, in the words every reader uses.
    package static func refusal(of hint: UnsafeRawBufferPointer, segmentID: UInt64, segmentLength: Int64, sealing: HintFile.Sealing?) -> String {
        if hint.count >= 10, hint.prefix(8).elementsEqual(HintFile.magic) {
            let version = hint.readLittleEndian(at: 8, as: UInt16.self)
            if (1...4).contains(version) {
                if sealing != nil && !HintFile.isEncrypted(version: version) { return "hint file is not encrypted, in an encrypted store" }
                if sealing == nil && HintFile.isEncrypted(version: version) { return "hint file is encrypted, in a store that is not" }
            }
        }
        if let summary = HintFile.declaredSummary(hint, sealing: sealing), summary.segmentID == segmentID, summary.coveredLength > segmentLength {
            return "it describes \(summary.coveredLength) bytes of a segment of \(segmentLength), and fails validation (block checksum or entry encoding)"
        }
        if sealing != nil {
            return "hint file fails validation (header, block checksum or tag, entry encoding, or another segment's salt), or describes more than the segment's \(segmentLength) bytes"
        }
        return "hint file fails validation (header, block checksum or entry encoding), or describes more than the segment's \(segmentLength) bytes"
    }

    /// The damage a hint file shows when its header (checksum valid) says it describes more bytes
    /// than its segment holds: a segment never shrinks below what its hint describes, so records
    /// at its end were lost (a copy cut short, a disk error). Bytes `segmentLength ..< covered`.
    package static func lostTail(
        segmentID: UInt64, path segmentPath: String, segmentLength: Int64, hint: UnsafeRawBufferPointer, sealing: HintFile.Sealing?
    ) -> DamagedRange? {
        guard let summary = HintFile.declaredSummary(hint, sealing: sealing), summary.segmentID == segmentID,
              summary.coveredLength > segmentLength else { return nil }
        return DamagedRange(
            kind: .record, file: segmentPath, segmentID: segmentID, offset: segmentLength, length: summary.coveredLength - segmentLength,
            reason: "the segment ends at \(segmentLength) bytes but its hint file describes \(summary.coveredLength): records at its end were lost ('cask recover --dry-run' names them)")
    }

    /// ``lostTail(segmentID:path:segmentLength:hint:)`` for the hint file at `hintPath`, from its
    /// header alone (nil when it cannot be read).
    package static func lostTail(
        segmentID: UInt64, path segmentPath: String, segmentLength: Int64, hintPath: String, sealing: HintFile.Sealing?, fileSystem: any FileSystem
    ) -> DamagedRange? {
        hintHeader(at: hintPath, fileSystem: fileSystem).flatMap { header in
            header.withUnsafeBytes { lostTail(segmentID: segmentID, path: segmentPath, segmentLength: segmentLength, hint: $0, sealing: sealing) }
        }
    }

    /// The segment bytes a hint file whose first ``HintFile/headerLength`` bytes are `header`
    /// declares it describes (its header's checksum valid, naming segment `segmentID`), capped at
    /// 4 GiB; nil when its header says nothing usable.
    package static func declaredLength(ofHint header: [UInt8], segmentID: UInt64, sealing: HintFile.Sealing?) -> Int64? {
        guard let summary = header.withUnsafeBytes({ HintFile.declaredSummary($0, sealing: sealing) }), summary.segmentID == segmentID else { return nil }
        return min(summary.coveredLength, Int64(UInt32.max))
    }

    /// The first bytes of the hint file at `hintPath` (up to ``HintFile/maxHeaderLength``, at
    /// least ``HintFile/headerLength``), or nil when it cannot be read or is shorter: what
    /// ``HintFile/declaredSummary(_:sealing:)`` needs, without reading the whole file.
    package static func hintHeader(at hintPath: String, fileSystem: any FileSystem) -> [UInt8]? {
        let file: OpenFile
        do { file = try fileSystem.openFile(hintPath, flags: O_RDONLY, mode: 0) } catch { return nil }
        var header = [UInt8](repeating: 0, count: HintFile.maxHeaderLength)
        guard let read = try? header.withMutableBytes({ (raw) throws(Errno) in try fileSystem.readFully(file.descriptor, into: raw, at: 0) }),
              read >= HintFile.headerLength else { return nil }
        return Array(header[0..<read])
    }
}
