extension Duration {
    /// The expiry time `self` after `now` (both in milliseconds since 1970-01-01 UTC): whole
    /// milliseconds, a negative duration counting as zero, and a time past the last one a record
    /// can hold (`UInt64.max`) clamped to it, so that `.seconds(.max)` means "as late as can be"
    /// rather than an overflow trap.
    @usableFromInline
    func expiry(after now: UInt64) -> UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return now }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1000)
        let milliseconds = whole &+ UInt64(attoseconds / 1_000_000_000_000_000)  // Safe: a wrap shows as a sum below `whole`, checked next.
        guard !overflow, milliseconds >= whole else { return .max }
        let (sum, late) = now.addingReportingOverflow(milliseconds)
        return late ? .max : sum
    }
}
