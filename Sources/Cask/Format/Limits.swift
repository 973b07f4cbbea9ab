/// Hard limits of format version 1. Lengths read from disk are checked against them before
/// anything is allocated, so a corrupt length field can never cause a huge allocation.
public enum Limits {
    /// Keys are 1 to 65,535 bytes.
    public static let maxKeyLength = 65_535
    /// Values (uncompressed) are 0 to 256 MiB.
    public static let maxValueLength = 256 << 20
    /// Sequence numbers are 1 to 2^63 - 1, so that "next" never overflows.
    public static let maxSeq: UInt64 = (1 << 63) - 1
    /// The longest key prefix a segment header holds (``SegmentHeader/keyPrefix``).
    static let maxKeyPrefixLength = 255
    /// The most bytes a record header can take: crc, type, flags, the varints (seq, key length,
    /// elided prefix, value length, stored length), optional expiry.
    static let maxRecordHeaderLength = 4 + 1 + 1 + 10 + 3 + 2 + 5 + 5 + 8
    /// The most bytes a record takes besides its key and payload: its header and, encrypted, its tag.
    static let maxRecordOverhead = maxRecordHeaderLength + 16
    /// The largest record a reader must accept (an encrypted one's tag included).
    static let maxRecordLength = maxRecordHeaderLength + maxKeyLength + maxValueLength + 16
}
