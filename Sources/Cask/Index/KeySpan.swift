/// A range of keys in byte order, for the index's ordered walks: between a lower and an upper bound.
package struct KeySpan: Hashable, Sendable {
    package enum Bound: Hashable, Sendable {
        case unbounded
        case included([UInt8])
        case excluded([UInt8])
    }

    package var lower: Bound
    package var upper: Bound

    package init(lower: Bound = .unbounded, upper: Bound = .unbounded) {
        self.lower = lower
        self.upper = upper
    }

    /// Every key that starts with `prefix`: from `prefix` up to, not including, the first key
    /// after all of them (the prefix with its last byte below 0xFF raised by one, the bytes after
    /// it dropped); unbounded above when there is none (the prefix is all 0xFF or empty).
    package init(prefix: [UInt8]) {
        lower = prefix.isEmpty ? .unbounded : .included(prefix)
        upper = .unbounded
        if let last = prefix.lastIndex(where: { $0 != 0xFF }) {
            var end = Array(prefix[...last])
            end[last] += 1
            upper = .excluded(end)
        }
    }

    /// Keys from `from` (included) up to `to` (excluded); nil `to`: no end.
    package init(from: [UInt8], to: [UInt8]?) {
        lower = from.isEmpty ? .unbounded : .included(from)
        upper = to.map { .excluded($0) } ?? .unbounded
    }

    /// The part of the span after `key` in a walk's order: above it ascending, below it descending.
    package func resuming(after key: [UInt8], descending: Bool) -> KeySpan {
        var span = self
        if descending {
            if upper.admits(key, asUpper: true) { span.upper = .excluded(key) }
        } else {
            if lower.admits(key, asUpper: false) { span.lower = .excluded(key) }
        }
        return span
    }

    /// Whether `key` is inside the span.
    package func contains(_ key: UnsafeRawBufferPointer) -> Bool {
        lower.admits(key, asUpper: false) && upper.admits(key, asUpper: true)
    }
}

extension KeySpan.Bound {
    /// Whether `key` is on the span's side of this bound (below it when it is the upper one).
    func admits(_ key: UnsafeRawBufferPointer, asUpper: Bool) -> Bool {
        switch self {
        case .unbounded: return true
        case .included(let bound):
            let order = bound.withUnsafeBytes { OrderedKeys.compare(key, $0) }
            return asUpper ? order <= 0 : order >= 0
        case .excluded(let bound):
            let order = bound.withUnsafeBytes { OrderedKeys.compare(key, $0) }
            return asUpper ? order < 0 : order > 0
        }
    }

    func admits(_ key: [UInt8], asUpper: Bool) -> Bool {
        key.withUnsafeBytes { admits($0, asUpper: asUpper) }
    }
}
