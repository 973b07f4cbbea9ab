/// The tool's exit statuses (sysexits.h values for usage and data errors).
enum ExitCode: Int32 {
    case success = 0
    /// The command could not do its job: a missing key, a locked store, an I/O error, an encryption
    /// key it cannot use (``KeyFile``).
    case failure = 1
    /// The command line is wrong (EX_USAGE).
    case usage = 64
    /// Damaged or malformed data (EX_DATAERR): `verify` found damage, a read hit a bad record, or
    /// the input of `import` is malformed.
    case dataError = 65
}
