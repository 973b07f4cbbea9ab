@testable import Cask
import CaskTestSupport
import Foundation
import Synchronization
import XCTest

// What a documentation example finds in scope. Tools/extract-examples.py compiles every ```swift
// block of README.md and docs/*.md into Generated/, one test per block, and declares for it those
// of these names it uses and does not declare itself:
//
//   path    a store directory made for the example (an empty store, closed)
//   store   the store at `path`, open with the default options (closed after the example)
//   draft   a `Draft`, the model below
//   show    stands for an app's user interface: `show(user)`
//
// The rest of the convention (skipping a block, hidden setup and checks): Tools/extract-examples.py --help.

/// A model the examples store: a draft of a post.
struct Draft: Codable, Sendable, Equatable {
    var title: String
    var body: String
}

/// What an app would put on screen; the examples only say that they show it.
func show<T>(_ value: T) {}

/// One example's directory, and what ends the loops over its store's change streams.
final class Example: Sendable {
    let path: String
    let draft = Draft(title: "Hello", body: "A first post.")

    private let directory: TemporaryDirectory
    private let running = Mutex<Task<Void, any Error>?>(nil)
    private let stores = Mutex<[CaskStore]>([])
    private let watchers = Mutex<[Task<Void, any Error>]>([])

    /// How long an example may run: one whose `for await` loop nothing ends fails instead of hanging.
    static let timeLimit: Duration = .seconds(10)

    private init() throws {
        directory = TemporaryDirectory("cask-example")
        path = directory.appending("store")
        try CaskStore.open(at: path).close()
    }

    /// Runs `body` (an example) with a fresh directory, as a task of its own so that
    /// ``afterObserving(_:_:)`` can end it, and removes the directory afterwards.
    static func run(_ body: @escaping @Sendable (Example) async throws -> Void) async throws {
        let example = try Example()
        defer {
            for watcher in example.watchers.withLock({ $0 }) { watcher.cancel() }
            for store in example.stores.withLock({ $0 }) { try? store.close() }
            example.directory.remove()
        }
        let task = Task { try await body(example) }
        example.running.withLock { $0 = task }
        let watchdog = Task {
            try await Task.sleep(for: timeLimit)
            task.cancel()
            XCTFail("the example ran for \(timeLimit) without finishing: a `for await` loop over a change stream needs `afterObserving(store) { … }` in an `<!-- example: setup … -->` marker to end it")
        }
        defer { watchdog.cancel() }
        try await task.value
    }

    /// The store at ``path``, open with the default options; closed when the example ends.
    func openStore() throws -> CaskStore {
        let store = try CaskStore.open(at: path)
        stores.withLock { $0.append(store) }
        return store
    }

    /// Ends an example that loops over one of `store`'s change streams: as soon as the stream
    /// exists, runs `change` (a write for the loop to see), then cancels the example's task, which
    /// ends its `for await` loops (an `AsyncStream` iteration ends when its task is cancelled).
    func afterObserving(_ store: CaskStore, _ change: @escaping @Sendable () throws -> Void = {}) {
        let watcher = Task {
            // Test-only look inside: whether the store has a live change stream.
            while !store.observers.isActive { try await Task.sleep(for: .milliseconds(1)) }
            try change()
            while running.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(1)) }
            // The change reaches the stream's buffer before `change()` returns; give the loop a
            // moment to take it before the cancellation ends the iteration.
            try await Task.sleep(for: .milliseconds(50))
            running.withLock { $0 }?.cancel()
        }
        watchers.withLock { $0.append(watcher) }  // cancelled when the example ends, if it never observed
    }
}
