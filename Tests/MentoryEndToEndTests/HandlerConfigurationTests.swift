import Foundation
import MentoryClient
import MentoryTestSupport
import Testing

@Suite("Handler configuration against the real daemon", .timeLimit(.minutes(10)))
struct HandlerConfigurationTests {
    @Test("a disabled handler is absent: not in status, not described, its namespace unknown")
    func disabledIsAbsent() async throws {
        let daemon = try await DaemonProcess(environment: [
            "MENTORYD_STORAGE_BACKEND": "memory", "MENTORYD_HANDLERS_REACHABILITY_ENABLED": "false",
        ])
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        let status = try await client.status()
        #expect(!status.handlers.map(\.namespace).contains("reachability"))
        #expect(status.handlers.map(\.namespace).contains("diary"))
        #expect(!status.topics.map(\.topic).contains("reachability"))
        do {
            _ = try await client.call("reachability", "get", body: Data())
            Issue.record("a disabled namespace answered")
        } catch {
            guard case .remote(let code, _, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(code == 6, "UNKNOWN_NAMESPACE")
        }
        await client.close()
        #expect(await daemon.stop() == 0)
        #expect(daemon.log.contains("handler disabled by configuration"))
    }

    @Test("a dependency cycle fails start-up with exit status 78 and the whole chain named")
    func cycle() async throws {
        let result = try await Self.runDaemonToExit(environment: [
            "MENTORYD_HANDLERS_DIARY_REQUIRES": "mentor",
            "MENTORYD_HANDLERS_MENTOR_REQUIRES": "diary",
        ])
        #expect(result.status == 78)
        #expect(result.stderr.contains("mentor -> diary -> mentor"), "\(result.stderr)")
    }

    @Test("a missing dependency fails start-up with exit status 78, naming what is missing and who needs it")
    func missing() async throws {
        let result = try await Self.runDaemonToExit(environment: ["MENTORYD_HANDLERS_DIARY_REQUIRES": "weather"])
        #expect(result.status == 78)
        #expect(result.stderr.contains("handler 'diary' requires 'weather'"), "\(result.stderr)")
        let disabled = try await Self.runDaemonToExit(environment: [
            "MENTORYD_HANDLERS_DIARY_REQUIRES": "mentor", "MENTORYD_HANDLERS_MENTOR_ENABLED": "false",
        ])
        #expect(disabled.status == 78)
        #expect(disabled.stderr.contains("'mentor', which is disabled"), "\(disabled.stderr)")
    }

    /// Starts mentoryd (in-memory store) expecting it to fail start-up, and returns how it exited;
    /// `config`, when given, is the text of its config file.
    static func runDaemonToExit(
        environment: [String: String] = [:], config: String? = nil, arguments: [String] = []
    ) async throws -> CommandResult {
        let directory = "\(TestTemporaryDirectory.path)/mentoryd-test-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var processEnvironment = environment
        processEnvironment["MENTORYD_STORAGE_BACKEND"] = "memory"
        var arguments = ["--socket", directory + "/d.sock", "--state-dir", directory + "/state"] + arguments
        if let config {
            try config.write(toFile: directory + "/mentoryd.json", atomically: true, encoding: .utf8)
            arguments += ["--config", directory + "/mentoryd.json"]
        }
        return try await CommandResult.run(
            DaemonProcess.binary("mentoryd"), arguments, environment: processEnvironment)
    }
}
