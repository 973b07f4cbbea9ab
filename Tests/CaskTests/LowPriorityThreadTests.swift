import Dispatch
import Foundation
import Synchronization
import XCTest
@testable import Cask
import CaskTestSupport

/// The thread that writes hint files runs below the application's priority, one item after
/// another, and a store's wait for its background work waits for its items there.
final class LowPriorityThreadTests: XCTestCase {
    /// Items run in the order given, on one thread, whose nice value is 10 above the caller's (at
    /// most 19); waiting for the group waits for every item.
    func testRunsInOrderOnOneLoweredThread() {
        let thread = LowPriorityThread(niceIncrement: 10)
        let group = DispatchGroup()
        let seen = Mutex<[(Int, Int32, String)]>([])
        errno = 0
        let callerNice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        for n in 0..<50 {
            thread.async(group: group) {
                if n == 0 { Thread.sleep(forTimeInterval: 0.05) }  // the others queue up behind it
                let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
                // The name the kernel shows (top -H, ps -L), not only Foundation's.
                let text = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? ""
                seen.withLock { $0.append((n, nice, text)) }
            }
        }
        group.wait()
        let items = seen.withLock { $0 }
        XCTAssertEqual(items.map(\.0), Array(0..<50), "in the order given, each once, all done when the group is")
        XCTAssertEqual(Set(items.map(\.1)), [min(19, callerNice + 10)], "lowered by 10 from \(callerNice)")
        XCTAssertEqual(Set(items.map(\.2)), [LowPriorityThread.threadName])
        XCTAssertEqual(thread.nice, min(19, callerNice + 10))
        XCTAssertEqual(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0), callerNice, "the caller's priority is its own")
    }

    /// A sealed segment's hint is written there: the store's `waitForBackgroundWork()` and
    /// `close()` wait for it, and every sealed segment has its hint afterwards.
    func testStoresWriteHintsOnTheSharedThread() throws {
        let dir = TemporaryDirectory("cask-low-priority-hints")
        let store = try CaskStore.open(at: dir.path, options: .manualCompaction(maxSegmentSize: 8 << 10))
        var random = SeededGenerator(seed: 5)
        for i in 0..<200 { try store.put("k\(i)", random.bytes(300)) }
        store.waitForBackgroundWork()
        let sealed = try store.statistics().segments.filter(\.sealed).map(\.id)
        XCTAssertGreaterThan(sealed.count, 3)
        for id in sealed { XCTAssertTrue(FileManager.default.fileExists(atPath: dir.path + "/" + SegmentName.hint(id)), "segment \(id)") }
        XCTAssertEqual(LowPriorityThread.shared.nice.map { $0 > 0 }, true, "the shared thread has started, lowered")
        try store.close()
    }
}
