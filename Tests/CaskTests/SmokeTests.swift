import XCTest
@testable import Cask
final class SmokeTests: XCTestCase {
    func testPutGet() throws {
        let dir = NSTemporaryDirectory() + "/cask-smoke-\(UUID().uuidString)"
        let store = try CaskStore.open(at: dir)
        try store.put("a", Array("hello".utf8))
        XCTAssertEqual(try store.get("a"), Array("hello".utf8))
        try store.close()
    }
}
