// A probe, not a workload of the suite: how much of a listing with values is the cost of records
// lying where random writes put them. The same store twice — 1M keys (`%016d`, so 1,000 prefixes
// of 1,000 keys) with cask-bench's kind of 100-byte values, written in random order and then in
// key order — and on each the best of 3 rounds of 2,000 listings of one random prefix's keys and
// values (`forEach(in: .prefix)`), as `scanprefix` lists them.
//
//   swift run -c release listing-order-probe [directory]
import Cask
import Foundation

func seconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

let base = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : NSTemporaryDirectory()
var rng = SystemRandomNumberGenerator()
let half: [UInt8] = (0..<50).map { _ in UInt8.random(in: 32...126, using: &rng) }
let value = half + half
for order in ["random order", "key order"] {
    let directory = base + "/listing-order-probe-\(getpid())"
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var options = CaskStore.Options()
    options.automaticCompaction = false
    let store = try CaskStore.open(at: directory, options: options)
    var ids = Array(0..<1_000_000)
    if order == "random order" { ids.shuffle(using: &rng) }
    for id in ids { try store.put(Array(String(format: "%016d", id).utf8), value) }
    try store.waitForBackgroundWork()
    var bytes = 0, best = Double.infinity
    for _ in 0..<3 {
        let start = seconds()
        for _ in 0..<2_000 {
            let prefix = Array(String(format: "%013d", Int.random(in: 0..<1_000, using: &rng)).utf8)
            try store.forEach(in: .prefix(prefix)) { _, value in bytes &+= value.count }
        }
        best = min(best, seconds() - start)
    }
    precondition(bytes == 3 * 2_000 * 1_000 * value.count, "a listing did not return 1,000 values")
    print("\(order): \(Int(2_000 / best)) listings/s, \(Int(best / 2_000 / 1_000 * 1e9)) ns per entry")
    try store.close()
}
