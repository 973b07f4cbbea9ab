extension CaskStore {
    /// The namespace of typed keys: declare yours as static members of an extension, and use them as
    /// `.name` wherever a ``Key`` is expected.
    ///
    /// ```swift
    /// extension CaskStore.Keys {
    ///     static let currentUser = Key<User?>("current-user")
    ///     static let launchCount = Key<Int>("launch-count", default: 0)
    /// }
    /// let user = store[.currentUser]          // User?
    /// try store.set(store[.launchCount] + 1, for: .launchCount)
    /// ```
    public class Keys: @unchecked Sendable {  // immutable: every stored property is a `let` of a Sendable type
        /// The key in the store (its UTF-8 bytes).
        public let name: String
        /// The coder of this key's value, or nil for the store's ``ObjectOptions/coder``.
        public let coder: ObjectCoder?

        init(name: String, coder: ObjectCoder?) {
            self.name = name
            self.coder = coder
        }

        /// So that `Key<Value>(…)` needs no `CaskStore.` inside `extension CaskStore.Keys`.
        public typealias Key<Value: Codable & Sendable> = CaskStore.Key<Value>
    }

    /// A key that knows the type of its value and what to read when it is absent.
    ///
    /// For an optional `Value` the default is `nil`, and setting `nil` deletes the key.
    public final class Key<Value: Codable & Sendable>: Keys, @unchecked Sendable {  // immutable, as Keys
        /// What reading the key gives when it has no value.
        public let defaultValue: Value

        /// A key named `name` whose value reads as `defaultValue` when absent.
        public init(_ name: String, default defaultValue: Value, coder: ObjectCoder? = nil) {
            self.defaultValue = defaultValue
            super.init(name: name, coder: coder)
        }
    }
}

extension CaskStore.Key {
    /// A key of an optional value, reading as `nil` when absent.
    public convenience init<Wrapped>(_ name: String, coder: ObjectCoder? = nil) where Value == Wrapped? {
        self.init(name, default: nil, coder: coder)
    }
}

/// Lets generic code see that a value is an `Optional.none`.
protocol ObjectOptionalValue {
    var isNone: Bool { get }
}

extension Optional: ObjectOptionalValue {
    var isNone: Bool { self == nil }
}
