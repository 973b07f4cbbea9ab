/// What compaction does to the compression of the puts it copies: the one place a record is not
/// copied byte for byte (FORMAT.md, "Compaction").
///
/// The outputs name the store's current dictionary (none when it has none, or dictionaries are
/// off). A put is compressed again, with its seq, key and expiry unchanged, when
/// - it was compressed against a dictionary that is not the outputs' (it must be: a segment names
///   one dictionary), or
/// - the outputs have a dictionary, the put does not use one, and it is at least 32 bytes: it is
///   kept as it is unless the new record is smaller.
///
/// Owned by one compaction (not thread-safe): it reuses one encoder and its buffers.
final class Recompression {
    let dictionary: CompressionDictionary?
    /// Samples of the values copied, to train a dictionary from after the compaction (nil: none).
    private(set) var sampler: DictionarySampler?
    private let encoder = RecordEncoder()
    /// The last record ``recompress(_:header:from:offset:)`` made.
    private(set) var record = ByteBuffer(capacity: 4096)
    private var value = ByteBuffer(capacity: 4096)

    init(dictionary: CompressionDictionary?, sampling: Int?) {
        self.dictionary = dictionary
        sampler = sampling.map { DictionarySampler(target: $0) }
    }

    /// Takes the value of a put being copied as a sample, expanded if need be (a payload that does
    /// not expand is left out: copied byte for byte, it is found when read).
    private func sample(_ header: RecordHeader, payload: UnsafeRawBufferPointer, from input: SegmentFile) {
        guard header.type == .put, header.valueLength >= RecordEncoder.minimumCompressibleLength, sampler?.isFull == false else { return }
        guard header.isCompressed else { return sampler!.add(payload) }
        guard expand(header, payload: payload, from: input) == nil else { return }
        value.withUnsafeBytes { sampler!.add($0) }
    }

    /// Expands a compressed payload of `input` into ``value``; why it cannot be, if it cannot.
    private func expand(_ header: RecordHeader, payload: UnsafeRawBufferPointer, from input: SegmentFile) -> String? {
        let valueLength = header.valueLength
        value.count = 0
        value.reserve(valueLength)
        var problem: String?
        value.withUnsafeMutableCapacity { space in
            problem = CaskStore.payloadProblem(
                header, payload: payload, dictionary: input.dictionary, into: UnsafeMutableRawBufferPointer(rebasing: space[0..<valueLength]))
        }
        if problem == nil { value.count = valueLength }
        return problem
    }

    /// Compresses the record `bytes` (the plain form of a whole valid record of `input`, at `offset`:
    /// decrypted, without a tag) again into ``record``, in plain form, and returns its length, or nil
    /// when the record is to be copied as it is. Throws
    /// when its payload cannot be expanded (damage, or a dictionary that cannot be loaded): the
    /// compaction then stops and changes nothing.
    func recompress(_ bytes: UnsafeRawBufferPointer, header: RecordHeader, from input: SegmentFile, offset: UInt32) throws(CaskError) -> Int? {
        guard header.type == .put else { return nil }
        if sampler != nil {
            sample(header, payload: UnsafeRawBufferPointer(rebasing: bytes[header.payloadRange]), from: input)
        }
        let outputDictionary = dictionary?.id ?? 0
        let mustChange = header.usesDictionary && input.dictionary.id != outputDictionary
        let mayGain = outputDictionary != 0 && !header.usesDictionary && header.valueLength >= RecordEncoder.minimumCompressibleLength
        guard mustChange || mayGain else { return nil }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[header.payloadRange])
        record.count = 0
        if header.isCompressed, let problem = expand(header, payload: payload, from: input) {
            throw CaskError.corruptRecord(path: input.path, offset: Int64(offset), reason: problem)
        }
        // The key whole: the record goes to an output whose key prefix is its own.
        let length = header.withKey(in: bytes, prefix: input.keyPrefixBytes) { key in
            if header.isCompressed {
                return value.withUnsafeBytes { expanded in
                    encoder.append(
                        type: .put, seq: header.seq, key: key, value: expanded, expiresAt: header.expiresAt, dictionary: dictionary?.lz4,
                        to: &record)
                }
            }
            return encoder.append(
                type: .put, seq: header.seq, key: key, value: payload, expiresAt: header.expiresAt, dictionary: dictionary?.lz4, to: &record)
        }
        if value.capacity > 1 << 20 { value.reset(shrinkingTo: 4096) }
        // Compared with the key whole on both sides: the output elides its prefix from either.
        return mustChange || length < header.payloadEnd + header.elidedLength ? length : nil
    }
}
