/// The ``SegmentStats`` of every segment, kept current on each write under the store's lock.
///
/// An array in id order plus a position map, rather than a dictionary of structs: updating an
/// element in place through `Array`'s addressor costs no allocation, where a `Dictionary` element
/// modified through optional chaining can. The active segment is the last element, checked first.
package struct SegmentAccounting {
    package private(set) var segments: [SegmentStats] = []
    private var positions: [UInt64: Int] = [:]

    package init(_ stats: some Sequence<SegmentStats>) {
        segments = stats.sorted { $0.id < $1.id }
        for (position, segment) in segments.enumerated() { positions[segment.id] = position }
    }

    /// Adds a segment (usually with a higher id than any present; compaction outputs may not be).
    package mutating func append(_ stats: SegmentStats) {
        guard let last = segments.last, last.id > stats.id else {
            positions[stats.id] = segments.count
            segments.append(stats)
            return
        }
        segments.append(stats)
        segments.sort { $0.id < $1.id }
        reindex()
    }

    /// Removes the segments with these ids.
    package mutating func remove(_ ids: Set<UInt64>) {
        segments.removeAll { ids.contains($0.id) }
        reindex()
    }

    private mutating func reindex() {
        positions.removeAll(keepingCapacity: true)
        for (position, segment) in segments.enumerated() { positions[segment.id] = position }
    }

    /// Updates the stats of segment `id`, if it is present.
    @inline(__always)
    package mutating func update(_ id: UInt64, _ body: (inout SegmentStats) -> Void) {
        if let last = segments.indices.last, segments[last].id == id {
            body(&segments[last])
        } else if let position = positions[id] {
            body(&segments[position])
        }
    }

    package subscript(id: UInt64) -> SegmentStats? {
        positions[id].map { segments[$0] }
    }
}
