import Foundation

enum Format {
    /// 1234567 → "1,234,567"
    static func grouped(_ value: Double) -> String {
        let digits = String(Int(value.rounded()))
        var result = ""
        for (n, character) in digits.reversed().enumerated() {
            if n > 0 && n % 3 == 0 && character != "-" { result.append(",") }
            result.append(character)
        }
        return String(result.reversed())
    }

    /// Ops/s in a short form: "1.23M", "456k", "789".
    static func rate(_ value: Double) -> String {
        if value >= 1e6 { return String(format: "%.2fM", value / 1e6) }
        if value >= 1e4 { return String(format: "%.0fk", value / 1e3) }
        if value >= 1e3 { return String(format: "%.1fk", value / 1e3) }
        return String(format: "%.0f", value)
    }

    static func bytes(_ value: Int64) -> String {
        let v = Double(value)
        if v >= Double(1 << 30) { return String(format: "%.2f GiB", v / Double(1 << 30)) }
        if v >= Double(1 << 20) { return String(format: "%.1f MiB", v / Double(1 << 20)) }
        if v >= Double(1 << 10) { return String(format: "%.0f KiB", v / Double(1 << 10)) }
        return "\(value) B"
    }

    static func ratio(_ value: Double) -> String {
        value >= 10 ? String(format: "%.0f×", value) : String(format: "%.2f×", value)
    }

    /// A series' label: "fillsync sync, 16 writers".
    static func group(_ series: Series) -> String {
        series.workload + " " + series.mode + (series.writers > 1 || series.workload == "fillsync" ? ", \(series.writers) writer\(series.writers == 1 ? "" : "s")" : "")
    }

    /// A file-name-safe id for a series: "fillsync-sync-w16".
    static func slug(_ series: Series) -> String {
        series.workload + "-" + series.mode + (series.writers > 1 || series.workload == "fillsync" ? "-w\(series.writers)" : "")
    }
}
