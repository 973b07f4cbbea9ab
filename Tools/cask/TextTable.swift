/// A plain-text table: an optional header row, columns separated by two spaces, numbers right-aligned.
struct TextTable {
    struct Column {
        var title: String
        var rightAligned: Bool
    }

    var columns: [Column]
    var rows: [[String]] = []
    /// Whether the column titles are printed as the first row.
    var showsTitles = true

    init(_ columns: [Column]) { self.columns = columns }

    mutating func add(_ row: [String]) { rows.append(row) }

    var text: String {
        let all = (showsTitles ? [columns.map(\.title)] : []) + rows
        let widths = columns.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            columns.indices.map { column in
                let cell = row[column]
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return columns[column].rightAligned ? pad + cell : cell + pad
            }.joined(separator: "  ").trimmingTrailingSpaces()
        }.joined(separator: "\n") + "\n"
    }
}

extension String {
    func trimmingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
