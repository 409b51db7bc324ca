import Foundation
import MentoryClient
import MentoryTestSupport
import Testing

@Suite("A configuration that is wrong, against the real daemon", .timeLimit(.minutes(10)))
struct ConfigurationEndToEndTests {
    @Test(
        "a misspelled key or section, a wrong type, a bad range or a trailing comma fails start-up with exit status 78",
        arguments: [
            (
                #"{"limits": {"maxFrameLenght": 65536}}"#,
                ["limits.maxFrameLenght", "did you mean limits.maxFrameLength?"]
            ),
            (#"{"log": {"lvel": "debug"}}"#, ["log.lvel", "did you mean log.level?"]),
            (#"{"limit": {"maxConnections": 10}}"#, ["unknown key limit ", "did you mean limits?"]),
            (#"{"limits": {"maxConnections": "ten"}}"#, ["limits.maxConnections must be a whole number"]),
            (#"{"limits": {"maxFrameLength": 5}}"#, ["limits.maxFrameLength is 5", "from 262144"]),
            ("{\n  \"log\": {\"level\": \"info\",}\n}\n", ["line 2"]),
            (#"{"plugins": {"declared": ["kudos"], "advisor": {}}}"#, ["plugins.declared", "plugins.kudos"]),
        ]
    )
    func startupFails(config: String, expected: [String]) async throws {
        let result = try await HandlerConfigurationTests.runDaemonToExit(config: config)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("/mentoryd.json"), "the message names the file: \(result.stderr)")
        for text in expected {
            #expect(result.stderr.contains(text), "\(result.stderr)")
        }
    }

    @Test("a value out of range given as a flag or variable fails start-up with exit status 78, naming the key")
    func flagsAndVariables() async throws {
        let flag = try await HandlerConfigurationTests.runDaemonToExit(arguments: ["--max-frame-length", "5"])
        #expect(flag.status == 78)
        #expect(flag.stderr.contains("limits.maxFrameLength"), "\(flag.stderr)")
        let variable = try await HandlerConfigurationTests.runDaemonToExit(environment: [
            "MENTORYD_LIMITS_MAX_CONNECTIONS": "ten"
        ])
        #expect(variable.status == 78)
        #expect(variable.stderr.contains("MENTORYD_LIMITS_MAX_CONNECTIONS"), "\(variable.stderr)")
    }

    @Test("a misspelled key fails the reload, naming the key and a suggestion; the previous configuration stays")
    func reloadFails() async throws {
        let daemon = try await DaemonProcess(
            environment: ["MENTORYD_STORAGE_BACKEND": "memory"], config: #"{"limits": {"maxConnectionsPerUID": 4}}"#)
        defer { daemon.removeFiles() }
        let configPath = daemon.directory + "/mentoryd.json"

        try #"{"limits": {"maxConectionsPerUID": 2}}"#.write(
            toFile: configPath, atomically: true, encoding: .utf8)
        let failed = try await daemon.ctl(["reload"])
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("limits.maxConectionsPerUID"), "\(failed.stderr)")
        #expect(failed.stderr.contains("did you mean limits.maxConnectionsPerUID?"), "\(failed.stderr)")
        #expect(failed.stderr.contains(configPath), "\(failed.stderr)")
        #expect(try await daemon.ctl(["ping"]).status == 0)
        #expect(!daemon.log.contains("connection limits changed"), "nothing of the refused file was applied")

        try #"{"limits": {"maxConnectionsPerUID": 2}}"#.write(toFile: configPath, atomically: true, encoding: .utf8)
        let fixed = try await daemon.ctl(["reload"])
        #expect(fixed.status == 0, "\(fixed.stderr)")
        #expect(daemon.log.contains("connection limits changed"))
        #expect(await daemon.stop() == 0)
    }

    @Test("a plugins.NAME section alone declares the plugin")
    func pluginSectionDeclares() async throws {
        let daemon = try await DaemonProcess(
            environment: ["MENTORYD_STORAGE_BACKEND": "memory"], config: #"{"plugins": {"advisor": {}}}"#)
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        let status = try await client.status()
        #expect(status.plugins.map(\.name) == ["advisor"])
        await client.close()
        #expect(await daemon.stop() == 0)
    }
}
