extension Duration {
    /// Whole milliseconds, negative durations counting as zero: an expiry `duration` from now.
    @usableFromInline
    var clampedMilliseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }
}
