import CAllocationCounter
import XCTest
@testable import Cask
import CaskTestSupport

/// Heap allocations per operation on the calling thread: a deterministic figure, checked here so
/// that a change that makes the put or the read path allocate more fails the suite. Counted in
/// this (debug) build, over 2,000 overwrites and reads of 1,000 keys after a warm-up (in
/// `.buffered` mode the buffer grows once: the 0.0005). The release build's figures — put 0,
/// `withValue` 0, `get` 1 — are the benchmark's `allocs_put` and `allocs_get`
/// (Benchmarks/README.md, "Allocations"). Skipped under the sanitizers, which replace the allocator.
final class AllocationTests: XCTestCase {
    func testPutsAndReadsDoNotAllocate() throws {
        try XCTSkipUnless(cask_allocation_counting_available(), "allocations are not counted under a sanitizer")
        for durability in [Durability.os, .buffered] {
            let dir = TemporaryDirectory("cask-allocations")
            defer { dir.remove() }
            var options = CaskStore.Options(durability: durability)
            options.automaticCompaction = false
            let store = try CaskStore.open(at: dir.path, options: options)
            let keys = (0..<1_000).map { Array(String(format: "%016d", $0).utf8) }
            var random = SeededGenerator(seed: 11)
            let values = (0..<16).map { _ in random.bytes(50) + [UInt8](repeating: 7, count: 50) }

            func allocationsPerOperation(_ body: (Int) throws -> Void) rethrows -> Double {
                for n in 0..<keys.count { try body(n) }  // warm-up: the index and buffers reach their size
                let before = cask_thread_allocations()
                for n in 0..<2 * keys.count { try body(n % keys.count) }
                return Double(cask_thread_allocations() - before) / Double(2 * keys.count)
            }
            let put = try allocationsPerOperation { n in
                try keys[n].withUnsafeBytes { key in
                    try values[n % values.count].withUnsafeBytes { value in try store.put(key, value) }
                }
            }
            let write = try allocationsPerOperation { n in
                try keys[n].withUnsafeBytes { key in
                    try values[n % values.count].withUnsafeBytes { value in _ = try store.write(.put, key: key, value: value) }
                }
            }
            let read = try allocationsPerOperation { n in
                let length = try keys[n].withUnsafeBytes { key in try store.withValue(key) { $0.count } }
                if length != 100 { XCTFail("\(durability): key \(n) read \(String(describing: length)) bytes") }
            }
            let get = try allocationsPerOperation { n in
                if try store.get(keys[n])?.count != 100 { XCTFail("\(durability): key \(n) did not read back") }
            }
            print("allocations per operation (\(durability), debug build): put \(put), write \(write), withValue \(read), get \(get)")
            // Unoptimized, a write allocates two boxes for variables its closures capture (the
            // optimizer keeps them on the stack: the release build's put allocates nothing).
            // In `.buffered` mode the buffer is handed to the OS once per 256 KiB of records, about
            // once per 2,000 of these; that flush may allocate once (0.0005 per write).
            XCTAssertLessThanOrEqual(write, 2.001, "\(durability): a write allocates more than before")
            XCTAssertLessThanOrEqual(put, write + 0.001, "\(durability): put allocates more than the write it makes")
            XCTAssertEqual(read, 0, "\(durability): a withValue read allocates")
            XCTAssertEqual(get, 1, "\(durability): a get allocates more than its result array")
            try store.close()
        }
    }

    /// An array of structs is allocated once, at its final size (the coder counts the elements
    /// first), not regrown as it fills: going from 2 to 34 elements costs exactly as many
    /// allocations as going from 34 to 66 (each element's own are the same; regrowing would add
    /// five reallocations to the first step and one to the second). Counted in this build,
    /// whatever its per-element figure.
    func testDecodingAnArrayOfStructsAllocatesTheArrayOnce() throws {
        try XCTSkipUnless(cask_allocation_counting_available(), "allocations are not counted under a sanitizer")
        let decoder = CaskBinaryDecoder()
        func allocations(_ count: Int) throws -> UInt64 {
            let bytes = try CaskBinaryEncoder().encode((0..<count).map { Nested(title: "n", count: $0) })
            XCTAssertEqual(try decoder.decode([Nested].self, from: bytes).count, count)  // warm-up
            let before = cask_thread_allocations()
            let decoded = try decoder.decode([Nested].self, from: bytes)
            let after = cask_thread_allocations()
            XCTAssertEqual(decoded.count, count)
            return after - before
        }
        _ = try allocations(66)  // the runtime's caches for these types filled
        let two = try allocations(2), thirtyFour = try allocations(34), sixtySix = try allocations(66)
        print("allocations decoding [Nested] (debug build): 2 elements \(two), 34 \(thirtyFour), 66 \(sixtySix)")
        XCTAssertEqual(thirtyFour - two, sixtySix - thirtyFour, "the array is regrown while it fills")
        XCTAssertEqual(try allocations(34), thirtyFour, "the count is not deterministic")
    }
}
