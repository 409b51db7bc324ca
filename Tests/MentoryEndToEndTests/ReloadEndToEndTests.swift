import Foundation
import MentoryClient
import MentoryTestSupport
import MentoryWire
import Testing

@Suite("Reloading the configuration with SIGHUP", .serialized, .timeLimit(.minutes(10)))
struct ReloadEndToEndTests {
    @Test("connection limits and access rules change live; the daemon keeps its connections")
    func limitsAndRulesChangeLive() async throws {
        let configPath = "\(TestTemporaryDirectory.path)/mentoryd-reload-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: configPath) }
        try Self.writeConfig(to: configPath, maxConnectionsPerUID: 2, rules: [])
        let daemon = try await DaemonProcess(arguments: ["--config", configPath])
        defer { daemon.removeFiles() }

        let first = try await daemon.client("first")
        let second = try await daemon.client("second")
        await #expect {
            try await daemon.client("third")
        } throws: { error in
            "\(error)".contains("connections")
        }

        let before = try await Self.mentorSetAsNobody(daemon, content: "Before the reload.")
        #expect(before.status == 0, "nobody may set the message before the reload: \(before.stderr)")

        try Self.writeConfig(to: configPath, maxConnectionsPerUID: 3, rules: ["deny uid=65534 mentor.set"])
        #expect(kill(daemon.pid, SIGHUP) == 0)
        try await Self.waitForLog(daemon, containing: "access rules changed")

        // The raised limit admits a third connection; the two already open were kept.
        let third = try await daemon.client("third")
        #expect(try await second.mentorGet().message.content == "Before the reload.")
        // The new rule refuses nobody's mentor.set, naming the method; the message is unchanged.
        let after = try await Self.mentorSetAsNobody(daemon, content: "After the reload.")
        #expect(after.status == 1)
        #expect(after.stderr.contains("permission denied"))
        #expect(after.stderr.contains("mentor.set"))
        #expect(try await third.mentorGet().message.content == "Before the reload.")

        for client in [first, second, third] { await client.close() }
        #expect(await daemon.stop() == 0)
    }

    @Test("mentoryctl reload fails on a broken config, naming the file and the place; the daemon keeps serving")
    func failedReloadIsReported() async throws {
        let configPath = "\(TestTemporaryDirectory.path)/mentoryd-reload-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: configPath) }
        try Self.writeConfig(to: configPath, maxConnectionsPerUID: 4, rules: [])
        let daemon = try await DaemonProcess(arguments: ["--config", configPath])
        defer { daemon.removeFiles() }

        // A JSON syntax error on line 3.
        try "{\n  \"socket\": {\"mode\": \"0666\"},\n  \"log\": {\"level\": debug}\n}\n".write(
            toFile: configPath, atomically: true, encoding: .utf8)
        let failed = try await daemon.ctl(["reload"])
        #expect(failed.status == 1)
        #expect(failed.stderr.contains(configPath), "\(failed.stderr)")
        #expect(failed.stderr.contains("line 3"), "\(failed.stderr)")
        #expect(failed.stderr.contains("previous configuration stays"), "\(failed.stderr)")
        #expect(daemon.log.contains("reload failed"))
        #expect(daemon.log.contains(configPath))
        // A setting that cannot be used fails it too, naming the key.
        try Self.writeConfig(to: configPath, maxConnectionsPerUID: 0, rules: [])
        let invalid = try await daemon.ctl(["reload"])
        #expect(invalid.status == 1)
        #expect(invalid.stderr.contains("limits.maxConnectionsPerUID"), "\(invalid.stderr)")
        #expect(invalid.stderr.contains(configPath), "\(invalid.stderr)")
        #expect(try await daemon.ctl(["ping"]).status == 0)

        // Fixed, the same command applies it and says so.
        try Self.writeConfig(to: configPath, maxConnectionsPerUID: 5, rules: [])
        let fixed = try await daemon.ctl(["reload"])
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(fixed.stdout.contains("reloaded"))
        #expect(daemon.log.contains("connection limits changed"))

        // Only root and the daemon's own user may ask.
        let asNobody = try await CommandResult.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", DaemonProcess.binary("mentoryctl").path,
                "reload", "--socket", daemon.socketPath,
            ],
            environment: [:]
        )
        #expect(asNobody.status == 1)
        #expect(asNobody.stderr.contains("permission denied"), "\(asNobody.stderr)")
        #expect(await daemon.stop() == 0)
    }

    static func mentorSetAsNobody(_ daemon: DaemonProcess, content: String) async throws -> CommandResult {
        try await CommandResult.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", DaemonProcess.binary("mentoryctl").path,
                "mentor", "set", "--content", content, "--character", "cool", "--socket", daemon.socketPath,
            ],
            environment: [:]
        )
    }

    static func writeConfig(to path: String, maxConnectionsPerUID: Int, rules: [String]) throws {
        let object: [String: Any] = [
            "socket": ["mode": "0666"],
            "limits": ["maxConnectionsPerUID": maxConnectionsPerUID],
            "access": ["rules": rules],
        ]
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
    }

    static func waitForLog(_ daemon: DaemonProcess, containing text: String) async throws {
        guard await eventually(timeout: .seconds(10), interval: .milliseconds(50), { daemon.log.contains(text) })
        else {
            throw DaemonFailure(message: "the daemon never logged '\(text)'; its log:\n" + daemon.log)
        }
    }
}
