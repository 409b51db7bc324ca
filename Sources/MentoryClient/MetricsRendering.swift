import MentoryWire
import SwiftProtobuf

/// Renders a `session.metrics` reply for people, as JSON, or in the Prometheus text format.
public enum MetricsRendering {
    // MARK: Prometheus

    /// The Prometheus text exposition format, version 0.0.4, as node_exporter's textfile collector
    /// reads it: per family a `# HELP` and a `# TYPE` line, then one line per sample; histograms as
    /// cumulative `_bucket{le="…"}` lines ending with `le="+Inf"`, then `_sum` and `_count`.
    /// Label values escape `\`, `"` and newlines; help texts escape `\` and newlines.
    public static func prometheus(_ reply: Mentory_V1_MetricsReply) -> String {
        var lines: [String] = []
        for family in reply.families {
            let name = family.name
            lines.append("# HELP \(name) \(self.escapeHelp(family.help))")
            switch family.type {
            case .histogram:
                lines.append("# TYPE \(name) histogram")
                for sample in family.samples {
                    let bounds = family.bucketBounds
                    for (index, bound) in bounds.enumerated() {
                        let count = index < sample.bucketCounts.count ? sample.bucketCounts[index] : sample.count
                        lines.append(
                            "\(name)_bucket\(self.labels(sample.labels, le: self.number(bound))) \(count)")
                    }
                    lines.append("\(name)_bucket\(self.labels(sample.labels, le: "+Inf")) \(sample.count)")
                    lines.append("\(name)_sum\(self.labels(sample.labels)) \(self.number(sample.sum))")
                    lines.append("\(name)_count\(self.labels(sample.labels)) \(sample.count)")
                }
            case .counter, .gauge, .unspecified, .UNRECOGNIZED:
                let type =
                    switch family.type {
                    case .counter: "counter"
                    case .gauge: "gauge"
                    default: "untyped"
                    }
                lines.append("# TYPE \(name) \(type)")
                for sample in family.samples {
                    lines.append("\(name)\(self.labels(sample.labels)) \(self.number(sample.value))")
                }
            }
        }
        return lines.map { $0 + "\n" }.joined()
    }

    /// `{name="value",…}` with `le` last, or nothing for no labels.
    static func labels(_ labels: [Mentory_V1_MetricLabel], le: String? = nil) -> String {
        var parts = labels.map { "\($0.name)=\"\(self.escapeLabelValue($0.value))\"" }
        if let le { parts.append("le=\"\(le)\"") }
        return parts.isEmpty ? "" : "{" + parts.joined(separator: ",") + "}"
    }

    /// A label value with `\`, `"` and line feeds escaped.
    public static func escapeLabelValue(_ value: String) -> String {
        // By scalar: "\r\n" is one Character, and its line feed must be escaped too.
        var escaped = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped.append(contentsOf: "\\\\".unicodeScalars)
            case "\"": escaped.append(contentsOf: "\\\"".unicodeScalars)
            case "\n": escaped.append(contentsOf: "\\n".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }

    /// A help text with `\` and line feeds escaped.
    public static func escapeHelp(_ help: String) -> String {
        var escaped = String.UnicodeScalarView()
        for scalar in help.unicodeScalars {
            switch scalar {
            case "\\": escaped.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": escaped.append(contentsOf: "\\n".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }

    /// A sample value as Prometheus writes it: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
    public static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    // MARK: JSON

    /// The reply as one line of proto3 JSON (64-bit numbers as numbers; fields at their default
    /// value, such as a counter at 0, are left out).
    public static func json(_ reply: Mentory_V1_MetricsReply) -> String {
        var options = JSONEncodingOptions()
        options.alwaysPrintInt64sAsNumbers = true
        return (try? reply.jsonString(options: options)) ?? "{}"
    }

    // MARK: Text

    /// For people: per family its name, type and help, then one line per label set. Histograms show
    /// their count, mean and the bucket bounds under which half and 99% of the observations fall;
    /// families whose name ends in `_seconds` show durations.
    public static func text(_ reply: Mentory_V1_MetricsReply) -> String {
        var lines: [String] = []
        for family in reply.families {
            let type =
                switch family.type {
                case .counter: "counter"
                case .gauge: "gauge"
                case .histogram: "histogram"
                default: "untyped"
                }
            lines.append("\(family.name) (\(type)): \(family.help)")
            let seconds = family.name.hasSuffix("_seconds")
            for sample in family.samples {
                let labels = sample.labels.map { "\($0.name)=\($0.value)" }.joined(separator: " ")
                let value: String
                if family.type == .histogram {
                    value = self.histogramSummary(sample, bounds: family.bucketBounds, seconds: seconds)
                } else {
                    value = self.number(sample.value)
                }
                lines.append("  " + (labels.isEmpty ? value : "\(labels)  \(value)"))
            }
        }
        if reply.truncated {
            lines.append("(truncated: more series than fit one reply)")
        }
        return lines.map { $0 + "\n" }.joined()
    }

    static func histogramSummary(_ sample: Mentory_V1_MetricSample, bounds: [Double], seconds: Bool) -> String {
        func show(_ value: Double) -> String { seconds ? self.duration(value) : self.number(value) }
        guard sample.count > 0 else { return "count 0" }
        var parts = ["count \(sample.count)", "mean \(show(sample.sum / Double(sample.count)))"]
        for (name, quantile) in [("p50", 0.5), ("p99", 0.99)] {
            let rank = UInt64((Double(sample.count) * quantile).rounded(.up))
            if let index = sample.bucketCounts.firstIndex(where: { $0 >= rank }), index < bounds.count {
                parts.append("\(name) ≤ \(show(bounds[index]))")
            } else {
                parts.append("\(name) > \(bounds.last.map(show) ?? "0")")
            }
        }
        return parts.joined(separator: "  ")
    }

    /// A duration in seconds, in µs, ms or s.
    static func duration(_ seconds: Double) -> String {
        func trimmed(_ value: Double) -> String {
            let rounded = (value * 100).rounded() / 100
            return rounded == rounded.rounded() ? String(Int64(rounded)) : "\(rounded)"
        }
        if seconds < 0.001 { return trimmed(seconds * 1e6) + " µs" }
        if seconds < 1 { return trimmed(seconds * 1e3) + " ms" }
        return trimmed(seconds) + " s"
    }
}
