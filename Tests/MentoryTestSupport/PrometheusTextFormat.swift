/// A checker of the Prometheus text exposition format, version 0.0.4, strict enough for what
/// node_exporter's textfile collector accepts (the reference is `promtool check metrics`).
///
/// It checks that every line is a `# HELP`, a `# TYPE` or a sample; that names and label names
/// are valid and label values properly quoted and escaped; that every sample belongs to a family
/// announced by a `# HELP` and a `# TYPE` line before it, each once; that a family's lines are
/// not interleaved with another's; and, for histograms, that each label set has `_bucket` lines
/// with ascending `le` bounds and non-decreasing counts ending with `le="+Inf"` equal to `_count`,
/// plus `_sum` and `_count`.
public enum PrometheusTextFormat {
    /// One parsed sample line.
    public struct Sample: Equatable, Sendable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }

    /// What the checker found wrong (empty when the text is valid), and the samples it parsed.
    public static func check(_ text: String) -> (problems: [String], samples: [Sample]) {
        var problems: [String] = []
        var samples: [Sample] = []
        var help: Set<String> = []
        var types: [String: String] = [:]
        var finished: Set<String> = []
        var current: String?
        // Per histogram and label set (without `le`): the bucket bounds and counts seen, in order.
        var buckets: [String: [(Double, Double)]] = [:]
        var counts: [String: Double] = [:]
        var sums: Set<String> = []

        func enter(_ family: String, line: Int) {
            if current != family {
                if let current { finished.insert(current) }
                if finished.contains(family) { problems.append("line \(line): family \(family) is split") }
                current = family
            }
        }

        guard text.isEmpty || text.hasSuffix("\n") else {
            return (["the text does not end with a line feed"], [])
        }
        for (offset, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let number = offset + 1
            let line = String(line)
            if line.hasPrefix("# HELP ") {
                let rest = line.dropFirst("# HELP ".count)
                let name = String(rest.prefix { $0 != " " })
                guard self.isMetricName(name) else {
                    problems.append("line \(number): bad name in HELP: \(name)")
                    continue
                }
                if !help.insert(name).inserted { problems.append("line \(number): second HELP for \(name)") }
                if types[name] != nil { problems.append("line \(number): HELP after TYPE for \(name)") }
                if !self.isEscapedHelp(String(rest.dropFirst(name.count))) {
                    problems.append("line \(number): bad escape in HELP of \(name)")
                }
                enter(name, line: number)
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst("# TYPE ".count).split(separator: " ", omittingEmptySubsequences: false)
                guard parts.count == 2, self.isMetricName(String(parts[0])),
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[1])
                else {
                    problems.append("line \(number): bad TYPE line: \(line)")
                    continue
                }
                let name = String(parts[0])
                if types[name] != nil { problems.append("line \(number): second TYPE for \(name)") }
                types[name] = String(parts[1])
                enter(name, line: number)
            } else if line.hasPrefix("#") {
                continue
            } else {
                guard let sample = self.parseSample(line) else {
                    problems.append("line \(number): not a valid sample: \(line)")
                    continue
                }
                samples.append(sample)
                let family = self.family(of: sample.name, types: types)
                guard let family, let type = types[family], help.contains(family) else {
                    problems.append("line \(number): \(sample.name) has no HELP and TYPE before it")
                    continue
                }
                enter(family, line: number)
                guard type == "histogram" else {
                    if sample.name != family { problems.append("line \(number): \(sample.name) in \(type) \(family)") }
                    continue
                }
                var labels = sample.labels
                let le = labels.removeValue(forKey: "le")
                let key =
                    family + "|"
                    + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                        separator: ",")
                switch sample.name {
                case family + "_bucket":
                    guard let le, let bound = le == "+Inf" ? Double.infinity : Double(le) else {
                        problems.append("line \(number): bucket without a valid le")
                        continue
                    }
                    if let last = buckets[key]?.last, last.0 >= bound || last.1 > sample.value {
                        problems.append("line \(number): buckets of \(key) not ascending or counts decreasing")
                    }
                    buckets[key, default: []].append((bound, sample.value))
                case family + "_sum":
                    sums.insert(key)
                case family + "_count":
                    counts[key] = sample.value
                default:
                    problems.append("line \(number): \(sample.name) in histogram \(family)")
                }
            }
        }
        for name in help.union(types.keys) where help.contains(name) != (types[name] != nil) {
            problems.append("\(name) lacks its HELP or its TYPE")
        }
        for (key, series) in buckets {
            guard let last = series.last, last.0 == .infinity else {
                problems.append("\(key): no le=\"+Inf\" bucket")
                continue
            }
            if counts[key] != last.1 { problems.append("\(key): _count differs from the +Inf bucket") }
            if !sums.contains(key) { problems.append("\(key): no _sum") }
        }
        return (problems, samples)
    }

    /// The family a sample belongs to: its own name, or for a histogram's `_bucket`, `_sum` and `_count`, the base.
    private static func family(of name: String, types: [String: String]) -> String? {
        if types[name] != nil { return name }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" || types[base] == "summary" { return base }
        }
        return nil
    }

    static func isMetricName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == ":"
        }
    }

    static func isLabelName(_ name: String) -> Bool {
        self.isMetricName(name) && !name.contains(":")
    }

    private static func isEscapedHelp(_ text: String) -> Bool {
        var scalars = text.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            if scalar == "\\" {
                guard let next = scalars.next(), next == "\\" || next == "n" else { return false }
            }
        }
        return true
    }

    /// `name{label="value",...} value`, without a timestamp.
    static func parseSample(_ line: String) -> Sample? {
        var scalars = Array(line.unicodeScalars)[...]
        let name = String(String.UnicodeScalarView(scalars.prefix { $0 != "{" && $0 != " " }))
        guard self.isMetricName(name) else { return nil }
        scalars = scalars.dropFirst(name.unicodeScalars.count)
        var labels: [String: String] = [:]
        if scalars.first == "{" {
            scalars = scalars.dropFirst()
            while scalars.first != "}" {
                let labelName = String(String.UnicodeScalarView(scalars.prefix { $0 != "=" }))
                guard self.isLabelName(labelName), labels[labelName] == nil else { return nil }
                scalars = scalars.dropFirst(labelName.unicodeScalars.count)
                guard scalars.first == "=", scalars.dropFirst().first == "\"" else { return nil }
                scalars = scalars.dropFirst(2)
                var value = String.UnicodeScalarView()
                while true {
                    guard let scalar = scalars.popFirst(), scalar != "\n" else { return nil }
                    if scalar == "\"" { break }
                    if scalar == "\\" {
                        switch scalars.popFirst() {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: return nil
                        }
                    } else {
                        value.append(scalar)
                    }
                }
                labels[labelName] = String(value)
                if scalars.first == "," { scalars = scalars.dropFirst() } else if scalars.first != "}" { return nil }
            }
            scalars = scalars.dropFirst()
        }
        guard scalars.first == " " else { return nil }
        let text = String(String.UnicodeScalarView(scalars.dropFirst()))
        let value: Double
        switch text {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default:
            guard let parsed = Double(text), !text.contains(" "), !text.lowercased().contains("inf"),
                !text.lowercased().contains("nan")
            else { return nil }
            value = parsed
        }
        return Sample(name: name, labels: labels, value: value)
    }
}
