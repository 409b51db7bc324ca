import Foundation
import MentoryDescriptors
import MentoryDomain
import MentoryWire

/// What is wrong with a configuration: a stable ``code`` and a message naming the key.
enum ConfigurationProblem: Error, Equatable, CustomStringConvertible {
    /// The file is not JSON as RFC 8259 defines it (a trailing comma, a comment, ...), or is nested too deep.
    case syntax(String)
    /// The file is larger than ``ConfigurationValidator/maxFileBytes``.
    case tooLarge(bytes: Int)
    /// No such key or section; `suggestion` is the nearest declared one, if any is near.
    case unknownKey(path: String, suggestion: String?)
    /// The same key twice in one object.
    case duplicateKey(path: String)
    /// The value has the wrong JSON type.
    case wrongType(path: String, expected: String, found: String)
    /// The value has the right type but is not allowed.
    case outOfRange(path: String, value: String, allowed: String)
    /// Something else the key's rules forbid, said in `reason`.
    case invalid(path: String, reason: String)

    /// A stable identifier of the kind of problem, e.g. `CONFIG_UNKNOWN_KEY`.
    var code: String {
        switch self {
        case .syntax: "CONFIG_SYNTAX"
        case .tooLarge: "CONFIG_TOO_LARGE"
        case .unknownKey: "CONFIG_UNKNOWN_KEY"
        case .duplicateKey: "CONFIG_DUPLICATE_KEY"
        case .wrongType: "CONFIG_WRONG_TYPE"
        case .outOfRange: "CONFIG_OUT_OF_RANGE"
        case .invalid: "CONFIG_INVALID"
        }
    }

    var description: String {
        switch self {
        case .syntax(let detail):
            detail
        case .tooLarge:
            "the file is larger than \(ConfigurationValidator.maxFileBytes) bytes, the most a configuration may have"
        case .unknownKey(let path, let suggestion):
            "unknown key \(path)" + (suggestion.map { " (did you mean \($0)?)" } ?? "")
                + "; the keys are listed in mentoryd --help and man mentoryd"
        case .duplicateKey(let path):
            "\(path) is set twice; keep one"
        case .wrongType(let path, let expected, let found):
            "\(path) must be \(expected), not \(found)"
        case .outOfRange(let path, let value, let allowed):
            "\(path) is \(value); it must be \(allowed)"
        case .invalid(let path, let reason):
            "\(path): \(reason)"
        }
    }
}

/// Checks a configuration against ``ConfigurationKey/all``: every key and section known, every
/// value of its type and in its range, the file strict JSON.
struct ConfigurationValidator: Sendable {
    /// The largest config file read.
    static let maxFileBytes = 1 << 20
    /// The deepest nesting of objects and arrays in a config file.
    static let maxDepth = 16
    /// The most strings in one array (`access.rules`, `requires`).
    static let maxArrayCount = 1024

    /// The namespaces handlers of this process serve, each with whether its handler reads keys of its
    /// own in `handlers.NAME` (the handlers an embedding package adds may; the built-in ones do not).
    var handlerNamespaces: [String: Bool]

    /// The namespaces of the built-in handlers, none of which reads keys of its own.
    static let builtInHandlerNamespaces: [String] = (MentorySchema.namespaces + MentoryDomainSchema.namespaces)
        .map(\.name).filter { $0 != WireNames.session && $0 != WireNames.plugin }

    /// A validator for the built-in handlers and `addedNamespaces`.
    init(addedNamespaces: [String] = []) {
        var namespaces: [String: Bool] = [:]
        for name in Self.builtInHandlerNamespaces { namespaces[name] = false }
        for name in addedNamespaces { namespaces[name] = true }
        self.handlerNamespaces = namespaces
    }

    /// Parses `bytes` strictly, validates the result and returns it.
    @discardableResult
    func validate(file bytes: [UInt8]) throws(ConfigurationProblem) -> JSONValue {
        guard bytes.count <= Self.maxFileBytes else { throw .tooLarge(bytes: bytes.count) }
        let tree: JSONValue
        do {
            tree = try JSONParser.parse(bytes, maxDepth: Self.maxDepth)
        } catch {
            throw .syntax(error.description)
        }
        try self.validate(tree)
        return tree
    }

    /// The names of the `plugins.NAME` sections of a validated configuration, in file order.
    static func pluginNames(in tree: JSONValue) -> [String] {
        guard case .object(let sections) = tree,
            case .object(let plugins)? = sections.first(where: { $0.key == "plugins" })?.value
        else { return [] }
        return plugins.map(\.key).filter { $0 != "declared" }
    }

    /// Validates a parsed configuration.
    func validate(_ tree: JSONValue) throws(ConfigurationProblem) {
        let sections = try Self.members(of: tree, at: nil, expected: "an object")
        let sectionNames = Self.sectionNames
        for (name, value) in sections {
            switch name {
            case "handlers":
                try self.validateHandlers(value)
            case "plugins":
                try Self.validatePlugins(value)
            case _ where sectionNames.contains(name):
                for (key, leaf) in try Self.members(of: value, at: name, expected: "an object (a section)") {
                    let path = name + "." + key
                    guard let declared = ConfigurationKey.all.first(where: { $0.path == path }) else {
                        throw .unknownKey(path: path, suggestion: Self.suggestion(for: path))
                    }
                    try Self.check(leaf, against: declared, at: path)
                }
            default:
                throw .unknownKey(path: name, suggestion: Self.suggestion(for: name))
            }
        }
    }

    /// Checks the `MENTORYD_*` variables of the declared keys: each must parse as its key's type.
    func validate(environment: [String: String]) throws(ConfigurationProblem) {
        if environment["MENTORYD_PLUGINS_DECLARED"] != nil {
            throw .invalid(
                path: "$MENTORYD_PLUGINS_DECLARED",
                reason: "plugins are no longer declared by a list: give each plugin a plugins.NAME section in the"
                    + " config file (\"plugins\": {\"NAME\": {}}) and unset this variable")
        }
        for key in ConfigurationKey.all where !key.components.contains(ConfigurationKey.anyName) {
            guard let raw = environment[key.environmentVariable] else { continue }
            let path = "$\(key.environmentVariable) (\(key.path))"
            let text = raw.trimmingCharacters(in: .whitespaces)
            let value: JSONValue
            switch key.type {
            case .integer:
                value = Int(text) != nil ? .number(text) : .string(raw)
            case .bool:
                switch text.lowercased() {
                case "true", "yes", "1": value = .bool(true)
                case "false", "no", "0": value = .bool(false)
                default: value = .string(raw)
                }
            case .stringArray:
                value = .array(raw.split(separator: ",", omittingEmptySubsequences: false).map { .string(String($0)) })
            case .string, .fileMode:
                value = .string(raw)
            }
            try Self.check(value, against: key, at: path)
        }
    }

    // MARK: - Sections with names

    private func validateHandlers(_ value: JSONValue) throws(ConfigurationProblem) {
        for (namespace, section) in try Self.members(of: value, at: "handlers", expected: "an object (a section)") {
            let sectionPath = "handlers.\(namespace)"
            guard let ownKeys = self.handlerNamespaces[namespace] else {
                let near = Self.nearest(namespace, among: Array(self.handlerNamespaces.keys))
                throw .invalid(
                    path: sectionPath,
                    reason: "no handler of this mentoryd serves namespace '\(namespace)'"
                        + (near.map { " (did you mean handlers.\($0)?)" } ?? "")
                        + "; a plugin's section is plugins.\(namespace)")
            }
            for (key, leaf) in try Self.members(of: section, at: sectionPath, expected: "an object (a section)") {
                let path = "\(sectionPath).\(key)"
                if let declared = ConfigurationKey.all.first(where: { $0.path == "handlers.NAME.\(key)" }) {
                    try Self.check(leaf, against: declared, at: path)
                } else if !ownKeys {
                    let near = Self.nearest(key, among: Self.keys(under: "handlers.NAME"))
                    throw .unknownKey(path: path, suggestion: near.map { "\(sectionPath).\($0)" })
                }
            }
        }
    }

    private static func validatePlugins(_ value: JSONValue) throws(ConfigurationProblem) {
        var declared: [String]?
        var sections: [String] = []
        for (name, section) in try Self.members(of: value, at: "plugins", expected: "an object (a section)") {
            if name == "declared" {
                guard case .array(let names) = section else {
                    throw .wrongType(path: "plugins.declared", expected: "an array of strings", found: section.summary)
                }
                var strings: [String] = []
                for case .string(let text) in names { strings.append(text) }
                guard strings.count == names.count else {
                    throw .wrongType(path: "plugins.declared", expected: "an array of strings", found: "other values")
                }
                declared = strings
                continue
            }
            let sectionPath = "plugins.\(name)"
            guard DaemonSettings.isPluginName(name) else {
                throw .invalid(path: sectionPath, reason: "'\(name)' is not a plugin name (letters, digits, - and _)")
            }
            sections.append(name)
            for (key, leaf) in try Self.members(of: section, at: sectionPath, expected: "an object (a section)") {
                let path = "\(sectionPath).\(key)"
                guard let declaredKey = ConfigurationKey.all.first(where: { $0.path == "plugins.NAME.\(key)" }) else {
                    let near = Self.nearest(key, among: Self.keys(under: "plugins.NAME"))
                    throw .unknownKey(path: path, suggestion: near.map { "\(sectionPath).\($0)" })
                }
                try Self.check(leaf, against: declaredKey, at: path)
            }
        }
        // The list of earlier versions: accepted only when it names exactly the sections.
        if let declared {
            if let missing = declared.first(where: { !sections.contains($0) }) {
                throw .invalid(
                    path: "plugins.declared",
                    reason: "it lists '\(missing)', which has no plugins.\(missing) section; a plugins.NAME section"
                        + " declares plugin NAME, so add \"\(missing)\": {} under plugins and remove plugins.declared")
            }
            if let unlisted = sections.first(where: { !declared.contains($0) }) {
                throw .invalid(
                    path: "plugins.declared",
                    reason: "it does not list '\(unlisted)', which has a plugins.\(unlisted) section; a plugins.NAME"
                        + " section declares plugin NAME by itself, so remove plugins.declared")
            }
        }
    }

    // MARK: - Values

    /// Checks one value against its key's type and range.
    static func check(_ value: JSONValue, against key: ConfigurationKey, at path: String) throws(ConfigurationProblem) {
        switch key.type {
        case .integer(let range):
            guard case .number(let text) = value else {
                throw .wrongType(path: path, expected: "a whole number", found: value.summary)
            }
            guard let number = Int(text) else {
                throw .wrongType(path: path, expected: "a whole number", found: text)
            }
            guard range.contains(number) else {
                throw .outOfRange(path: path, value: text, allowed: "from \(range.lowerBound) to \(range.upperBound)")
            }
        case .string(let choices):
            guard case .string(let text) = value else {
                throw .wrongType(path: path, expected: "a string", found: value.summary)
            }
            if !choices.isEmpty, !choices.contains(text.lowercased()) {
                throw .outOfRange(
                    path: path, value: "'\(text)'", allowed: "one of " + choices.joined(separator: ", "))
            }
            if choices.isEmpty, text.isEmpty {
                throw .outOfRange(path: path, value: "empty", allowed: "a non-empty string")
            }
        case .fileMode:
            guard case .string(let text) = value else {
                throw .wrongType(
                    path: path, expected: "an octal permission in quotes, such as \"0660\"", found: value.summary)
            }
            guard let mode = UInt16(text, radix: 8), mode <= 0o777 else {
                throw .outOfRange(path: path, value: "'\(text)'", allowed: "an octal permission such as 0660")
            }
        case .bool:
            guard case .bool = value else {
                throw .wrongType(path: path, expected: "true or false", found: value.summary)
            }
        case .stringArray:
            guard case .array(let elements) = value,
                elements.allSatisfy({ if case .string = $0 { true } else { false } })
            else {
                throw .wrongType(path: path, expected: "an array of strings", found: value.summary)
            }
            guard elements.count <= Self.maxArrayCount else {
                throw .outOfRange(
                    path: path, value: "\(elements.count) strings", allowed: "at most \(Self.maxArrayCount) strings")
            }
        }
    }

    /// The members of an object, refusing another type and a key given twice.
    private static func members(
        of value: JSONValue, at path: String?, expected: String
    ) throws(ConfigurationProblem) -> [(key: String, value: JSONValue)] {
        guard case .object(let members) = value else {
            throw .wrongType(path: path ?? "the configuration", expected: expected, found: value.summary)
        }
        var seen: Set<String> = []
        for member in members where !seen.insert(member.key).inserted {
            throw .duplicateKey(path: path.map { "\($0).\(member.key)" } ?? member.key)
        }
        return members
    }

    // MARK: - Suggestions

    /// The top-level sections the declaration has.
    static var sectionNames: [String] {
        var names: [String] = []
        for key in ConfigurationKey.all where !names.contains(key.components[0]) { names.append(key.components[0]) }
        return names
    }

    /// The last components of the keys declared directly under `prefix`.
    private static func keys(under prefix: String) -> [String] {
        ConfigurationKey.all.filter { $0.path.hasPrefix(prefix + ".") }.map { $0.components.last! }
    }

    /// The nearest declared key or section to the unknown `path`: a near name in the same place, or
    /// else the same name in another section (`maxFrameLength` at the top: `limits.maxFrameLength`).
    static func suggestion(for path: String) -> String? {
        let components = path.split(separator: ".").map(String.init)
        let last = components.last ?? path
        if components.count == 1 {
            if let section = self.nearest(last, among: self.sectionNames) { return section }
        } else {
            let parent = components.dropLast().joined(separator: ".")
            if let near = self.nearest(last, among: self.keys(under: parent)) { return parent + "." + near }
        }
        let concrete = ConfigurationKey.all.filter { !$0.components.contains(ConfigurationKey.anyName) }
        return concrete.first { $0.components.last!.lowercased() == last.lowercased() }?.path
    }

    /// The candidate nearest to `name` by edit distance (ignoring case), if one is near enough to be a slip.
    static func nearest(_ name: String, among candidates: [String]) -> String? {
        let limit = max(2, name.count / 3)
        var best: (candidate: String, distance: Int)?
        for candidate in candidates.sorted() {
            let distance = self.editDistance(name.lowercased(), candidate.lowercased())
            if distance <= limit, distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        return best?.candidate
    }

    /// The Levenshtein distance between two strings, by characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
