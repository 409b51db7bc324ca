import Foundation
import MentoryDomain
import MentoryWire
import Testing

/// `mentoryctl describe`, `call` and `watch` driven by the daemon's `session.describe`, against a real daemon.
@Suite("Introspection through mentoryctl", .serialized, .timeLimit(.minutes(10)))
struct IntrospectionEndToEndTests {
    /// The namespaces a daemon on its SQLite store serves without fault injection: every built-in one but debug.
    /// The protocol's namespaces and the built-in domain's.
    static let builtInNamespaces = MentorySchema.namespaces + MentoryDomainSchema.namespaces
    static let servedNamespaces = Self.builtInNamespaces.filter { $0.name != "debug" }

    /// A method description's `privilege` as the JSON carries it: the enum value's name, absent when unspecified.
    static func privilege(_ value: Any?) -> Mentory_V1_Privilege {
        if let number = value as? Int { return Mentory_V1_Privilege(rawValue: number) ?? .unspecified }
        guard let name = value as? String else { return .unspecified }
        return Mentory_V1_Privilege.allCases.first { "PRIVILEGE_\($0)".uppercased() == name } ?? .unspecified
    }

    static func json(_ text: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw DaemonFailure(message: "not a JSON object: \(text)")
        }
        return object
    }

    @Test("describe lists every built-in namespace with its methods, topics, version and descriptors")
    func describe() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }

        let described = try await daemon.ctl(["--json", "describe"])
        #expect(described.status == 0, "\(described.stderr)")
        let reply = try described.json()
        let namespaces = try #require(reply["namespaces"] as? [[String: Any]])
        #expect(Set(namespaces.compactMap { $0["namespace"] as? String }) == Set(Self.servedNamespaces.map(\.name)))
        for expected in Self.servedNamespaces {
            let namespace = try #require(namespaces.first { $0["namespace"] as? String == expected.name })
            #expect(namespace["version"] as? Int == Int(expected.version), "\(expected.name)")
            let methods = (namespace["methods"] as? [[String: Any]] ?? []).map {
                MethodInfo(
                    name: $0["name"] as? String ?? "", request: $0["request"] as? String ?? "",
                    reply: $0["reply"] as? String ?? "", privilege: Self.privilege($0["privilege"]))
            }
            #expect(methods == expected.methods, "\(expected.name)")
            let topics = (namespace["topics"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            #expect(topics == expected.topics.map(\.name), "\(expected.name)")
        }
        let files = try #require((reply["descriptors"] as? [String: Any])?["file"] as? [[String: Any]])
        #expect(files.contains { $0["name"] as? String == "mentory.proto" })

        let text = try await daemon.ctl(["describe"])
        #expect(text.status == 0, "\(text.stderr)")
        for namespace in Self.servedNamespaces {
            #expect(text.stdout.contains("\(namespace.name) (version \(namespace.version))"), "\(text.stdout)")
        }
        #expect(text.stdout.contains("mentory.v1.DiaryAddRequest -> mentory.v1.DiaryEntry"))
        #expect(
            text.stdout.contains(
                "mentory.v1.DaemonReloadRequest -> mentory.v1.DaemonReloadReply  (privileged: root and the daemon's user only)"
            ), "\(text.stdout)")
        #expect(text.stdout.contains("topic: changes mentory.v1.DiaryChange, snapshots mentory.v1.DiarySnapshot"))

        let diary = try await daemon.ctl(["describe", "diary"])
        #expect(diary.status == 0, "\(diary.stderr)")
        #expect(diary.stdout.contains("message mentory.v1.DiaryAddRequest"))
        #expect(diary.stdout.contains("recordDate"))
        #expect(diary.stdout.contains("EMOTION_VERY_PLEASANT"))
        #expect(!diary.stdout.contains("mentor (version"))

        let missing = try await daemon.ctl(["describe", "nope"])
        #expect(missing.status == 1)
        #expect(missing.stdout.isEmpty)
        #expect(await daemon.stop() == 0)
    }

    /// What one `call` should do: succeed (and show `check` in its reply) or fail with this error name.
    struct Expectation {
        var method: String
        var body: String
        var outcome: Outcome
        enum Outcome {
            case reply(([String: Any]) -> Bool)
            case error(String)
        }
    }

    @Test("call reaches every built-in method; errors come with their code and name")
    func callEveryMethod() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }

        func call(_ method: String, _ body: String) async throws -> [String: Any] {
            let result = try await daemon.ctl(["--json", "call", method, body])
            #expect(result.status == 0, "\(method): \(result.stderr)")
            return try Self.json(result.stdout)
        }

        // Calls whose replies feed later calls.
        let mentor = try await call(
            "mentor.set",
            #"{"content": "Drink water.", "character": "MENTOR_CHARACTER_WARM", "actionItems": [{"text": "glass"}]}"#)
        let todo = try #require(
            ((mentor["message"] as? [String: Any])?["actionItems"] as? [[String: Any]])?.first?["id"] as? String)
        let entry = try await call(
            "diary.add",
            #"{"recordDate": "2026-11-20", "title": "Good news", "text": "It worked.", "emotion": "EMOTION_PLEASANT", "#
                + #""actionItems": [{"text": "celebrate"}], "createdAtUnixMs": "1795000000000"}"#
        )
        let entryID = try #require(entry["id"] as? String)
        #expect(entry["createdAtUnixMs"] as? String == "1795000000000", "64-bit integers are proto3 JSON strings")
        let suggestion = try #require((entry["actionItems"] as? [[String: Any]])?.first?["id"] as? String)

        let expectations: [Expectation] = [
            .init(method: "session.ping", body: "{}", outcome: .reply { $0.isEmpty }),
            .init(method: "session.status", body: "{}", outcome: .reply { $0["serverVersion"] as? String == "0.1.0" }),
            .init(
                method: "session.subscribe", body: #"{"topics": [{"topic": "diary"}]}"#,
                outcome: .reply { ($0["topics"] as? [[String: Any]])?.first?["topic"] as? String == "diary" }),
            .init(method: "session.unsubscribe", body: #"{"topics": ["diary"]}"#, outcome: .reply { $0.isEmpty }),
            // The test runs as root (or as the daemon's own user), whom the access policy lets monitor.
            .init(method: "session.monitor", body: #"{"namespaces": ["diary"]}"#, outcome: .reply { $0.isEmpty }),
            .init(
                method: "session.metrics", body: "{}",
                outcome: .reply { ($0["families"] as? [[String: Any]])?.isEmpty == false }),
            .init(
                method: "session.describe", body: #"{"namespace": "diary"}"#,
                outcome: .reply { ($0["namespaces"] as? [[String: Any]])?.first?["namespace"] as? String == "diary" }),
            .init(
                method: "mentor.get", body: "{}",
                outcome: .reply { ($0["message"] as? [String: Any])?["content"] as? String == "Drink water." }),
            .init(
                method: "mentor.completeTodo", body: #"{"id": "\#(todo)"}"#,
                outcome: .reply {
                    (($0["message"] as? [String: Any])?["actionItems"] as? [[String: Any]])?.first?["done"] as? Bool
                        == true
                }),
            .init(
                method: "mentor.set", body: #"{"content": "Again.", "character": 1}"#,
                outcome: .reply {
                    ($0["message"] as? [String: Any])?["character"] as? String == "MENTOR_CHARACTER_COOL"
                }),
            .init(
                method: "reachability.report", body: #"{"peer": "watch", "isPaired": true, "is_reachable": true}"#,
                outcome: .reply { $0["peer"] as? String == "watch" && $0["isPaired"] as? Bool == true }),
            .init(method: "reachability.get", body: "{}", outcome: .reply { $0["peers"] is [[String: Any]] }),
            .init(
                method: "diary.get", body: #"{"id": "\#(entryID)"}"#,
                outcome: .reply {
                    $0["title"] as? String == "Good news" && $0["emotion"] as? String == "EMOTION_PLEASANT"
                }),
            .init(
                method: "diary.list", body: #"{"limit": 10}"#,
                outcome: .reply { ($0["entries"] as? [[String: Any]])?.count == 1 }),
            .init(
                method: "diary.setSuggestionDone",
                body: #"{"entryId": "\#(entryID)", "suggestionId": "\#(suggestion)", "done": true}"#,
                outcome: .reply { ($0["actionItems"] as? [[String: Any]])?.first?["done"] as? Bool == true }),
            .init(
                method: "diary.delete", body: #"{"id": "\#(entryID)"}"#,
                outcome: .reply { $0["id"] as? String == entryID }),
            .init(
                method: "storage.backup", body: "{}",
                outcome: .reply { ($0["chunkBytes"] as? Int ?? 0) > 0 && $0["bytes"] is String }),
            // A new connection has no snapshot to read.
            .init(method: "storage.backupRead", body: #"{"offset": "0"}"#, outcome: .error("10 CONFLICT")),
            .init(method: "daemon.reload", body: "{}", outcome: .reply { $0.isEmpty }),
            // Registered only with debug.faultInjection, so not described: the daemon itself refuses it.
            .init(method: "debug.freezeEngine", body: "{}", outcome: .error("6 UNKNOWN_NAMESPACE")),
            // No plugin is declared in this daemon's configuration, and this connection registered nothing.
            .init(method: "plugin.register", body: "{}", outcome: .error("11 PERMISSION_DENIED")),
            .init(method: "plugin.publish", body: "{}", outcome: .error("8 INVALID_ARGUMENT")),
            .init(method: "plugin.call", body: "{}", outcome: .error("8 INVALID_ARGUMENT")),
        ]
        let covered = Set(expectations.map(\.method) + ["mentor.set", "diary.add"])
        let declared = Set(
            Self.builtInNamespaces.flatMap { namespace in namespace.methods.map { "\(namespace.name).\($0.name)" } })
        #expect(covered == declared, "every built-in method is called")

        for expectation in expectations {
            let result = try await daemon.ctl(["--json", "call", expectation.method, expectation.body])
            switch expectation.outcome {
            case .reply(let check):
                #expect(result.status == 0, "\(expectation.method): \(result.stderr)")
                let reply = try? Self.json(result.stdout)
                #expect(reply.map(check) == true, "\(expectation.method): \(result.stdout)")
            case .error(let error):
                #expect(result.status == 1, "\(expectation.method): \(result.stdout)")
                // With --json the error is also on stdout, as {"error": {"code": …, "message": …}}.
                let wire = (try? Self.json(result.stdout))?["error"] as? [String: Any]
                #expect(
                    (wire?["code"] as? Int).map(String.init) == error.split(separator: " ").first.map(String.init),
                    "\(expectation.method): \(result.stdout)")
                #expect(
                    result.stderr.contains("\(expectation.method) failed: error \(error): "),
                    "\(expectation.method): \(result.stderr)")
            }
        }
        #expect(await daemon.stop() == 0)
    }

    @Test("call: bodies from stdin, readable output, and the errors of bodies and methods")
    func callErrors() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }

        let fromStdin = try await daemon.ctl(
            ["call", "diary.add", "-"],
            input: Data(#"{"record_date": "2026-11-21", "title": "Piped", "text": "x", "emotion": 4}"#.utf8))
        #expect(fromStdin.status == 0, "\(fromStdin.stderr)")
        #expect(fromStdin.stdout.contains("\n  \"title\": \"Piped\""), "without --json the reply is indented")

        let notFound = try await daemon.ctl(["call", "diary.get", #"{"id": "no-such-id"}"#])
        #expect(notFound.status == 1)
        #expect(notFound.stderr.contains("diary.get failed: error 9 NOT_FOUND: "), "\(notFound.stderr)")
        #expect(notFound.stderr.contains("not found"))

        let invalid = try await daemon.ctl([
            "call", "diary.add", #"{"title": "", "text": "x", "recordDate": "2026-01-01"}"#,
        ])
        #expect(invalid.status == 1)
        #expect(invalid.stderr.contains("error 8 INVALID_ARGUMENT: "), "\(invalid.stderr)")

        let unknownField = try await daemon.ctl(["call", "diary.add", #"{"titel": "x"}"#])
        #expect(unknownField.status == 64)
        #expect(
            unknownField.stderr.contains("unknown field 'titel' in mentory.v1.DiaryAddRequest"),
            "\(unknownField.stderr)")

        let badEnum = try await daemon.ctl(["call", "diary.add", #"{"emotion": "HAPPY"}"#])
        #expect(badEnum.status == 64)
        #expect(badEnum.stderr.contains("field 'emotion' expects one of EMOTION_UNSPECIFIED"), "\(badEnum.stderr)")

        let badJSON = try await daemon.ctl(["call", "diary.list", "{limit: 1}"])
        #expect(badJSON.status == 64)
        #expect(badJSON.stderr.contains("invalid JSON at line 1"), "\(badJSON.stderr)")

        let unknownMethod = try await daemon.ctl(["call", "diary.nope"])
        #expect(unknownMethod.status == 1)
        #expect(unknownMethod.stderr.contains("error 7 UNKNOWN_METHOD"), "\(unknownMethod.stderr)")

        let unknownNamespace = try await daemon.ctl(["call", "nope.nope", #"{"a": 1}"#])
        #expect(unknownNamespace.status == 1)
        #expect(
            unknownNamespace.stderr.contains("nope.nope failed: error 6 UNKNOWN_NAMESPACE: "),
            "\(unknownNamespace.stderr)")

        let usage = try await daemon.ctl(["call", "nodot"])
        #expect(usage.status == 64)
        #expect(await daemon.stop() == 0)
    }

    @Test("watch takes its default topics from describe and decodes every event through the descriptors")
    func watchThroughDescriptors() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let added = try await daemon.ctl([
            "call", "diary.add",
            #"{"recordDate": "2026-11-20", "title": "Seen", "text": "x", "emotion": "EMOTION_NEUTRAL"}"#,
        ])
        #expect(added.status == 0, "\(added.stderr)")

        let topics = Self.builtInNamespaces.flatMap(\.topics).map(\.name)
        let watch = try await daemon.ctl(["--json", "watch", "--count", "\(topics.count)"])
        #expect(watch.status == 0, "\(watch.stderr)")
        let lines = try watch.stdout.split(separator: "\n").map { try Self.json(String($0)) }
        #expect(Set(lines.compactMap { $0["topic"] as? String }) == Set(topics))
        #expect(lines.allSatisfy { $0["kind"] as? String == "snapshot" })
        let diary = try #require(lines.first { $0["topic"] as? String == "diary" })
        let entries = try #require((diary["body"] as? [String: Any])?["entries"] as? [[String: Any]])
        #expect(entries.first?["title"] as? String == "Seen")
        #expect(entries.first?["emotion"] as? String == "EMOTION_NEUTRAL")
        #expect(await daemon.stop() == 0)
    }
}
