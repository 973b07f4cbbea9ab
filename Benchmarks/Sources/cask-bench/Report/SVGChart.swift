import Foundation

/// Horizontal bar charts as standalone SVG (no dependencies; renders on GitHub and in browsers).
enum SVGChart {
    struct Bar {
        var label: String
        var value: Double
        var minimum: Double
        var maximum: Double
        /// Text right of the bar.
        var note: String
        var color: String
    }

    static let caskColor = "#d9480f"
    static let peerColor = "#4263eb"
    static let referenceColor = "#868e96"

    static func color(for engine: String) -> String {
        engine == "cask" || engine.hasPrefix("cask-") ? caskColor : Target.peers.contains(engine) ? peerColor : referenceColor
    }

    /// A coordinate with one decimal.
    private static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    /// Bars from zero on a linear scale, a min–max whisker on each.
    static func bars(title: String, subtitle: String, bars: [Bar]) -> String {
        // Room for the longest label (about 7 px a character at 12 px).
        let labelWidth = max(90.0, Double(bars.map(\.label.count).max() ?? 0) * 7.2 + 14)
        let width = 760.0, noteWidth = 230.0, rowHeight = 26.0, top = 52.0
        let plotWidth = width - labelWidth - noteWidth - 20
        let height = top + rowHeight * Double(bars.count) + 14
        let scale = max(bars.map { max($0.value, $0.maximum) }.max() ?? 1, 1e-9) * 1.02
        var svg = header(width: width, height: height, title: title, subtitle: subtitle)
        for (n, bar) in bars.enumerated() {
            let y = top + rowHeight * Double(n)
            let length = max(1, plotWidth * bar.value / scale)
            svg += text(x: labelWidth - 8, y: y + 17, bar.label, anchor: "end", weight: bar.color == caskColor ? "bold" : "normal")
            svg += "<rect x=\"\(f(labelWidth))\" y=\"\(f(y + 4))\" width=\"\(f(length))\" height=\"\(f(rowHeight - 8))\" fill=\"\(bar.color)\" rx=\"2\"/>\n"
            if bar.maximum > bar.minimum {
                let x1 = labelWidth + plotWidth * bar.minimum / scale, x2 = labelWidth + plotWidth * bar.maximum / scale
                svg += "<path d=\"M\(f(x1)) \(f(y + 13))H\(f(x2))M\(f(x1)) \(f(y + 8))V\(f(y + 18))M\(f(x2)) \(f(y + 8))V\(f(y + 18))\" stroke=\"#212529\" stroke-width=\"1.2\" fill=\"none\"/>\n"
            }
            svg += text(x: labelWidth + max(length, plotWidth * bar.maximum / scale) + 6, y: y + 17, bar.note, anchor: "start")
        }
        return svg + "</svg>\n"
    }

    /// Cask ÷ best peer per workload on a log scale centred on 1× (right: Cask faster).
    static func ratios(title: String, subtitle: String, rows: [(label: String, ratio: Double, note: String)]) -> String {
        let width = 760.0, labelWidth = 200.0, noteWidth = 170.0, rowHeight = 24.0, top = 70.0
        let plotWidth = width - labelWidth - noteWidth - 10
        let height = top + rowHeight * Double(rows.count) + 14
        let low = -4.0, high = 5.0  // log2 range: 1/16× … 32×
        func x(_ ratio: Double) -> Double {
            labelWidth + plotWidth * (min(max(log2(max(ratio, 1e-9)), low), high) - low) / (high - low)
        }
        var svg = header(width: width, height: height, title: title, subtitle: subtitle)
        for exponent in stride(from: Int(low), through: Int(high), by: 1) {
            let ratio = pow(2.0, Double(exponent))
            let position = x(ratio)
            svg += "<line x1=\"\(f(position))\" y1=\"\(f(top - 4))\" x2=\"\(f(position))\" y2=\"\(f(height - 10))\" stroke=\"\(exponent == 0 ? "#212529" : "#dee2e6")\" stroke-width=\"\(exponent == 0 ? "1.5" : "1")\"/>\n"
            let tick = exponent >= 0 ? "\(Int(ratio))×" : "1/\(Int(1 / ratio))×"
            svg += text(x: position, y: top - 8, tick, anchor: "middle", size: 10)
        }
        for (n, row) in rows.enumerated() {
            let y = top + rowHeight * Double(n)
            let start = x(1), end = x(row.ratio)
            svg += text(x: labelWidth - 8, y: y + 16, row.label, anchor: "end")
            svg += "<rect x=\"\(f(min(start, end)))\" y=\"\(f(y + 4))\" width=\"\(f(max(1, abs(end - start))))\" height=\"\(f(rowHeight - 8))\" fill=\"\(row.ratio >= 1 ? caskColor : referenceColor)\" rx=\"2\"/>\n"
            svg += text(x: labelWidth + plotWidth + 8, y: y + 16, row.note, anchor: "start")
        }
        return svg + "</svg>\n"
    }

    private static func header(width: Double, height: Double, title: String, subtitle: String) -> String {
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(f(width))\" height=\"\(f(height))\" viewBox=\"0 0 \(f(width)) \(f(height))\" font-family=\"-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
        svg += "<rect width=\"\(f(width))\" height=\"\(f(height))\" fill=\"#ffffff\"/>\n"
        svg += text(x: 10, y: 20, title, anchor: "start", weight: "bold", size: 14)
        svg += text(x: 10, y: 37, subtitle, anchor: "start", size: 11, color: "#495057")
        return svg
    }

    private static func text(x: Double, y: Double, _ content: String, anchor: String, weight: String = "normal", size: Int = 12, color: String = "#212529") -> String {
        "<text x=\"\(f(x))\" y=\"\(f(y))\" text-anchor=\"\(anchor)\" font-weight=\"\(weight)\" font-size=\"\(size)\" fill=\"\(color)\">\(escape(content))</text>\n"
    }
}
