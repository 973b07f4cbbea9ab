/// What a record does to its key.
public enum RecordType: UInt8, Sendable, CustomStringConvertible {
    /// Sets the key to the record's value.
    case put = 1
    /// Deletes the key (a tombstone). Carries no value.
    case delete = 2
    /// Commits an atomic batch: the puts and deletes flagged ``RecordFlags/batchMember`` just before
    /// it, in the same segment. Its key is the batch's first seq (u64, little-endian); its raw value
    /// is the number of members (varint). Members without their commit are never applied.
    case batch = 3

    public var description: String {
        switch self {
        case .put: "put"
        case .delete: "delete"
        case .batch: "batch"
        }
    }
}

/// Bits of a record's flags byte.
package enum RecordFlags {
    /// The payload is one LZ4 block that expands to `valueLength` bytes.
    package static let lz4: UInt8 = 0x01
    /// An 8-byte expiry time follows the varints.
    package static let expires: UInt8 = 0x02
    /// The record belongs to the atomic batch committed by the next batch record.
    package static let batchMember: UInt8 = 0x04
    /// With ``lz4``: the LZ4 block refers back into the dictionary its segment's header names
    /// (``SegmentHeader/dictionaryID``), and expands only with it.
    package static let dictionary: UInt8 = 0x08
    /// The key and payload are sealed with the segment's cipher (ciphertext of the same length) and
    /// followed by a 16-byte tag: every record of an encrypted segment, and only those.
    package static let encrypted: UInt8 = 0x10
    /// The key's first bytes are the segment's key prefix (``SegmentHeader/keyPrefix``): a varint
    /// after the key length says how many, and only the rest is stored. Only in a segment that
    /// names a prefix, never with ``encrypted``.
    package static let keyPrefix: UInt8 = 0x20
    package static let known: UInt8 = lz4 | expires | batchMember | dictionary | encrypted | keyPrefix
}
