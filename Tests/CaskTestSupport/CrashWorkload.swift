import Cask

/// One writer thread of the crash workload, shared by `cask-crash-writer` (killed by `CrashTests`)
/// and `KillSimulationTests` (cut in process): puts, overwrites and deletes of the thread's own keys,
/// and atomic batches of three keys of their own, each logged as an intent line before it starts and
/// an acknowledgement line once it returned (the format `AckLog` reads).
///
/// Each thread owns its keys, so on any key the operations are sequential and the log orders them
/// exactly. Values are `crashValue(key:version:)`; versions are `seed << 32 | n`.
public enum CrashWorkload {
    /// Keys per thread: a small key space so that keys are overwritten and deleted often.
    public static let keysPerThread: UInt64 = 48

    /// Writes until `shouldStop()` or an operation fails; returns the failure: the operation (as
    /// "put <key>", "delete <key>" or "batch <keys>") and its error.
    public static func write(
        _ store: CaskStore, thread: Int, seed: UInt64, log: (String) -> Void, shouldStop: () -> Bool = { false }
    ) -> (operation: String, error: CaskError)? {
        var random = SeededGenerator(seed: seed &* 0x2545_F491_4F6C_DD1D ^ UInt64(thread + 1))
        var counter: UInt64 = 0
        while !shouldStop() {
            counter += 1
            let version = seed << 32 | counter
            let key = "t\(thread)-k\(random.next() % keysPerThread)"
            let dice = random.next() % 100
            if dice >= 90 {
                // An atomic batch: three keys of their own that only batches write, one version.
                let group = random.next() % 8
                let keys = ["x", "y", "z"].map { "t\(thread)-b\(group)\($0)" }
                let line = "\(thread) B \(keys.joined(separator: ",")) \(version)"
                log("I " + line)
                var batch = WriteBatch()
                for key in keys { batch.put(key, crashValue(key: key, version: version)) }
                do { try store.write(batch) } catch { return ("batch \(keys.joined(separator: ","))", error) }
                log("A " + line)
                continue
            }
            let isPut = dice < 68
            let line = "\(thread) \(isPut ? "P" : "D") \(key) \(version)"
            log("I " + line)
            do {
                if isPut {
                    try store.put(key, crashValue(key: key, version: version))
                } else {
                    try store.delete(key)
                }
            } catch {
                return ("\(isPut ? "put" : "delete") \(key)", error)
            }
            log("A " + line)
        }
        return nil
    }
}
