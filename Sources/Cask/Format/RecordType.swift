/// What a record does to its key.
public enum RecordType: UInt8, Sendable, CustomStringConvertible {
    /// Sets the key to the record's value.
    case put = 1
    /// Deletes the key (a tombstone). Carries no value.
    case delete = 2
    /// Reserved for atomic batches (several puts and deletes under one checksum).
    /// Format version 1 readers report it as unsupported.
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
    package static let known: UInt8 = lz4 | expires
}
