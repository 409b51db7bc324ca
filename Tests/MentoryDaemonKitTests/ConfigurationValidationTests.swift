import Configuration
import Foundation
import Testing

@testable import MentoryDaemonKit

@Suite("The configuration: one declaration, strict validation, derived documentation")
struct ConfigurationValidationTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The problem validating `json` finds, or `nil`.
    private func problem(
        _ json: String, validator: ConfigurationValidator = ConfigurationValidator()
    ) -> ConfigurationProblem? {
        do {
            try validator.validate(file: Array(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "a misspelled key or section is refused with the nearest known one",
        arguments: [
            (#"{"limits": {"maxFrameLenght": 65536}}"#, "limits.maxFrameLenght", "limits.maxFrameLength"),
            (#"{"log": {"lvel": "debug"}}"#, "log.lvel", "log.level"),
            (#"{"limit": {"maxConnections": 10}}"#, "limit", "limits"),
            (#"{"maxConnections": 10}"#, "maxConnections", "limits.maxConnections"),
            (#"{"handlers": {"diary": {"enabeld": false}}}"#, "handlers.diary.enabeld", "handlers.diary.enabled"),
            (#"{"plugins": {"kudos": {"namespce": "k"}}}"#, "plugins.kudos.namespce", "plugins.kudos.namespace"),
        ]
    )
    func misspelled(json: String, path: String, suggestion: String) {
        let found = self.problem(json)
        #expect(found == .unknownKey(path: path, suggestion: suggestion))
        #expect(found?.code == "CONFIG_UNKNOWN_KEY")
        #expect(found?.description.contains("did you mean \(suggestion)?") == true, "\(String(describing: found))")
    }

    @Test("a key far from every known one is refused without a guess")
    func unknownWithoutSuggestion() {
        #expect(self.problem(#"{"limits": {"zzzzzzzz": 1}}"#) == .unknownKey(path: "limits.zzzzzzzz", suggestion: nil))
    }

    @Test("a value of the wrong type is refused, naming the key and what it must be")
    func wrongType() {
        let found = self.problem(#"{"limits": {"maxConnections": "ten"}}"#)
        #expect(found == .wrongType(path: "limits.maxConnections", expected: "a whole number", found: "'ten'"))
        #expect(self.problem(#"{"limits": {"maxConnections": 10.5}}"#)?.code == "CONFIG_WRONG_TYPE")
        #expect(self.problem(#"{"debug": {"faultInjection": "yes"}}"#)?.code == "CONFIG_WRONG_TYPE")
        #expect(self.problem(#"{"access": {"rules": "deny any debug.*"}}"#)?.code == "CONFIG_WRONG_TYPE")
        #expect(self.problem(#"{"log": "debug"}"#)?.code == "CONFIG_WRONG_TYPE")
        #expect(self.problem(#"[]"#)?.code == "CONFIG_WRONG_TYPE")
    }

    @Test("a value out of its declared range is refused; maxFrameLength keeps room for the largest reply")
    func outOfRange() {
        let found = self.problem(#"{"limits": {"maxFrameLength": 5}}"#)
        guard case .outOfRange(let path, let value, let allowed) = found else {
            Issue.record("expected out of range, got \(String(describing: found))")
            return
        }
        #expect(path == "limits.maxFrameLength")
        #expect(value == "5")
        #expect(allowed == "from 262144 to 4294967295")
        #expect(self.problem(#"{"log": {"level": "loud"}}"#)?.code == "CONFIG_OUT_OF_RANGE")
        #expect(self.problem(#"{"socket": {"mode": "0999"}}"#)?.code == "CONFIG_OUT_OF_RANGE")
        #expect(self.problem(#"{"limits": {"maxFrameLength": 262144}}"#) == nil)
    }

    @Test("the JSON is strict: a trailing comma, a comment or a key given twice is refused")
    func strictJSON() {
        let comma = self.problem("{\n  \"log\": {\"level\": \"info\",}\n}")
        #expect(comma?.code == "CONFIG_SYNTAX")
        #expect(comma?.description.contains("line 2") == true, "\(String(describing: comma))")
        #expect(comma?.description.contains("trailing comma") == true, "\(String(describing: comma))")
        let huge = String(repeating: " ", count: ConfigurationValidator.maxFileBytes) + "{}"
        #expect(self.problem(huge)?.code == "CONFIG_TOO_LARGE")
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(self.problem(#"{"access": {"rules": \#(deep)}}"#)?.code == "CONFIG_SYNTAX")
        #expect(self.problem(#"{"access": {"rules": ["deny any debug.*",]}}"#)?.code == "CONFIG_SYNTAX")
        #expect(self.problem("{\"log\": {} // no\n}")?.code == "CONFIG_SYNTAX")
        #expect(
            self.problem(#"{"log": {"level": "info", "level": "debug"}}"#) == .duplicateKey(path: "log.level"))
    }

    @Test("plugins are the plugins.NAME sections; an old plugins.declared must name exactly them")
    func plugins() throws {
        let config = #"{"plugins": {"advisor": {}, "kudos": {"namespace": "praise", "requires": ["diary"]}}}"#
        #expect(self.problem(config) == nil)
        let tree = try ConfigurationValidator().validate(file: Array(config.utf8))
        #expect(ConfigurationValidator.pluginNames(in: tree) == ["advisor", "kudos"])
        #expect(self.problem(#"{"plugins": {"declared": ["advisor"], "advisor": {}}}"#) == nil)
        let undeclaredSection = self.problem(#"{"plugins": {"declared": ["kudos"], "advisor": {}}}"#)
        #expect(undeclaredSection?.code == "CONFIG_INVALID")
        #expect(undeclaredSection?.description.contains("plugins.kudos") == true)
        #expect(self.problem(#"{"plugins": {"declared": [], "advisor": {}}}"#)?.code == "CONFIG_INVALID")
        #expect(self.problem(#"{"plugins": {"bad name": {}}}"#)?.code == "CONFIG_INVALID")
        #expect(self.problem(#"{"plugins": {"advisor": true}}"#)?.code == "CONFIG_WRONG_TYPE")
    }

    @Test("handlers.NAME must name a served namespace; only an added handler's section holds keys of its own")
    func handlers() {
        let unknown = self.problem(#"{"handlers": {"diray": {"enabled": false}}}"#)
        #expect(unknown?.description.contains("did you mean handlers.diary?") == true, "\(String(describing: unknown))")
        #expect(self.problem(#"{"handlers": {"diary": {"maxNotes": 3}}}"#)?.code == "CONFIG_UNKNOWN_KEY")
        let added = ConfigurationValidator(addedNamespaces: ["gratitude"])
        #expect(self.problem(#"{"handlers": {"gratitude": {"maxNotes": 3}}}"#, validator: added) == nil)
        #expect(
            self.problem(#"{"handlers": {"gratitude": {"enabled": "no"}}}"#, validator: added)?.code
                == "CONFIG_WRONG_TYPE")
    }

    @Test("the MENTORYD_* variables of the declared keys are checked as their keys are")
    func environment() throws {
        let validator = ConfigurationValidator()
        #expect(throws: ConfigurationProblem.self) {
            try validator.validate(environment: ["MENTORYD_LIMITS_MAX_CONNECTIONS": "ten"])
        }
        #expect(throws: ConfigurationProblem.self) {
            try validator.validate(environment: ["MENTORYD_LIMITS_MAX_FRAME_LENGTH": "5"])
        }
        #expect(throws: ConfigurationProblem.self) {
            try validator.validate(environment: ["MENTORYD_PLUGINS_DECLARED": "echo"])
        }
        try validator.validate(environment: [
            "MENTORYD_LIMITS_MAX_CONNECTIONS": "10", "MENTORYD_DEBUG_FAULT_INJECTION": "yes",
            "MENTORYD_LOG_LEVEL": "DEBUG", "MENTORY_SOCKET": "/elsewhere",
        ])
    }

    @Test("each concrete key's environment variable reaches the setting it names")
    func environmentVariableNames() throws {
        let integers = ConfigurationKey.all.filter {
            if case .integer = $0.type { !$0.components.contains(ConfigurationKey.anyName) } else { false }
        }
        #expect(!integers.isEmpty)
        var environment: [String: String] = [:]
        for key in integers {
            guard case .integer(let range) = key.type else { continue }
            environment[key.environmentVariable] = "\(range.upperBound)"
        }
        let settings = try DaemonSettings(
            config: ConfigReader(
                provider: EnvironmentVariablesProvider(environmentVariables: environment)
                    .prefixKeys(with: "mentoryd")),
            environment: [:])
        for key in integers {
            guard case .integer(let range) = key.type else { continue }
            #expect(
                settings.restartValues[key.path] ?? "live" == (key.reload == .live ? "live" : "\(range.upperBound)"))
        }
        #expect(
            ConfigurationKey.named("limits.maxConnectionsPerUID").environmentVariable
                == "MENTORYD_LIMITS_MAX_CONNECTIONS_PER_UID")
        #expect(settings.maxConnectionsPerUID == 1_000_000)
    }

    @Test("every declared default is valid for its own key, and every path is declared once")
    func declarationIsConsistent() throws {
        #expect(Set(ConfigurationKey.all.map(\.path)).count == ConfigurationKey.all.count)
        for key in ConfigurationKey.all {
            let value: String? =
                switch key.defaultValue {
                case .integer(let number): "\(number)"
                case .string(let text): "\"\(text)\""
                case .bool(let flag): "\(flag)"
                case .strings(let strings): "[" + strings.map { "\"\($0)\"" }.joined(separator: ",") + "]"
                case .described: nil
                }
            guard let value else { continue }
            let components = key.components.map { $0 == ConfigurationKey.anyName ? "diary" : $0 }
            let json = components.reversed().reduce(value) { inner, name in "{\"\(name)\": \(inner)}" }
            #expect(self.problem(json) == nil, "\(key.path)'s default \(value)")
        }
        let settings = try DaemonSettings(
            config: ConfigReader(provider: InMemoryProvider(values: [:])), environment: [:])
        let restart = ConfigurationKey.all.filter { $0.reload == .restart && !$0.path.hasPrefix("plugins.") }
        for key in restart {
            let path = key.path.replacing("NAME", with: "diary")
            #expect(settings.restartValues[path] != nil, "a reload compares \(path)")
        }
    }

    @Test("the shipped config/mentoryd.json is valid")
    func shippedConfig() throws {
        let data = try Data(contentsOf: Self.repository.appendingPathComponent("config/mentoryd.json"))
        #expect(self.problem(String(decoding: data, as: UTF8.self)) == nil)
    }

    @Test("docs/CONFIGURATION.md's table of keys is what the declaration renders")
    func referenceTable() throws {
        let reference = try String(
            contentsOf: Self.repository.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        #expect(
            reference.contains(ConfigurationReference.markdownTable),
            "docs/CONFIGURATION.md's configuration table differs from ConfigurationKey.all; run scripts/generate-manuals.sh"
        )
    }

    @Test("the man page and --help list every key as the declaration renders it")
    func manualAndHelp() throws {
        let manual = try String(
            contentsOf: Self.repository.appendingPathComponent("docs/man/mentoryd.8"), encoding: .utf8)
        let help = MentorydCommand.helpMessage()
        for paragraph in ConfigurationReference.helpText.split(separator: "\n\n") {
            #expect(
                manual.contains(paragraph), "docs/man/mentoryd.8 lacks '\(paragraph)'; run scripts/generate-manuals.sh")
        }
        for key in ConfigurationKey.all {
            #expect(help.contains(key.path), "--help lacks \(key.path)")
        }
        #expect(!manual.contains("\n\n"), "an empty line in the man page (use .Pp)")
    }

    @Test(
        "a setting a MENTORYD_* variable made unusable names the variable, and a JSON list says lists are comma-separated"
    )
    func badEnvironmentValueNamesTheVariable() async throws {
        let source = SettingsSource(
            flags: [:], configFile: nil, environment: ["MENTORYD_ACCESS_RULES": #"["deny uid=65534 diary.*"]"#])
        do {
            _ = try await source.load()
            Issue.record("a JSON list in MENTORYD_ACCESS_RULES was accepted")
        } catch {
            let text = error.description
            #expect(
                text.hasPrefix("the configuration cannot be used: $MENTORYD_ACCESS_RULES (access.rules)"), "\(text)")
            #expect(!text.contains("mentoryd.json"), "\(text)")
            #expect(text.contains("separated by commas, not JSON"), "\(text)")
        }
        // Comma-separated, each item trimmed: two rules.
        let fine = SettingsSource(
            flags: [:], configFile: nil,
            environment: ["MENTORYD_ACCESS_RULES": "deny uid=65534 diary.*, deny any debug.* storage.* session.monitor"]
        )
        _ = try await fine.load()
    }
}
