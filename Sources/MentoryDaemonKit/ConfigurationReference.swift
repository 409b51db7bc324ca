/// The configuration keys as docs/CONFIGURATION.md's table and as `mentoryd --help` (and so the man
/// page) show them, rendered from ``ConfigurationKey/all``; tests check that the committed
/// docs/CONFIGURATION.md and man page hold what these render.
enum ConfigurationReference {
    /// docs/CONFIGURATION.md's table of keys, one row per key.
    static var markdownTable: String {
        var lines = [
            "| key | type | default | on reload | meaning |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key in ConfigurationKey.all {
            let cells = [
                "`\(key.path)`", self.typeText(key.type, markdown: true),
                self.defaultText(key.defaultValue, markdown: true),
                key.reload.rawValue, key.summary.replacingPipes,
            ]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The keys for `--help`: one paragraph each, in plain text (no Markdown back quotes).
    static var helpText: String {
        var paragraphs = [
            "Configuration keys (JSON config file sections and keys; the environment variable of key a.bC"
                + " is MENTORYD_A_B_C). An unknown key or section, a value of the wrong type or out of range,"
                + " or JSON that is not strict (a trailing comma) stops start-up with exit status 78 and fails"
                + " a reload:"
        ]
        for key in ConfigurationKey.all {
            paragraphs.append(
                "\(key.path) (\(self.typeText(key.type, markdown: false)); default "
                    + "\(self.defaultText(key.defaultValue, markdown: false)); "
                    + (key.reload == .live ? "changes live on reload" : "a change needs a restart") + "): "
                    + key.summary.withoutBackQuotes)
        }
        return paragraphs.joined(separator: "\n\n")
    }

    /// The live keys, e.g. for the help's reload sentence: `log.level, limits.maxConnections, ...`.
    static var liveKeys: String {
        ConfigurationKey.live.map(\.path).joined(separator: ", ")
    }

    private static func typeText(_ type: ConfigurationKey.ValueType, markdown: Bool) -> String {
        let quote = markdown ? "`" : ""
        switch type {
        case .integer(let range):
            return "integer, \(range.lowerBound) to \(range.upperBound)"
        case .string(let choices):
            return choices.isEmpty ? "string" : choices.map { quote + $0 + quote }.joined(separator: ", ")
        case .fileMode:
            return "octal string"
        case .bool:
            return "boolean"
        case .stringArray:
            return "array of strings"
        }
    }

    private static func defaultText(_ value: ConfigurationKey.Default, markdown: Bool) -> String {
        let quote = markdown ? "`" : ""
        switch value {
        case .integer(let number): return "\(number)"
        case .string(let text): return quote + text + quote
        case .bool(let flag): return quote + "\(flag)" + quote
        case .strings(let strings):
            return quote + "[" + strings.map { "\"\($0)\"" }.joined(separator: ", ") + "]" + quote
        case .described(let text): return markdown ? text : text.withoutBackQuotes
        }
    }
}

extension String {
    fileprivate var replacingPipes: String { self.replacing("|", with: "\\|") }
    fileprivate var withoutBackQuotes: String { self.replacing("`", with: "") }
}
