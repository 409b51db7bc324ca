import Foundation
import MentoryTestSupport
import MentoryWire
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Start-up failures under systemd", .timeLimit(.minutes(10)))
struct StartupFailureTests {
    @Test("a damaged database stops start-up: STATUS= says why, READY=1 never comes, the exit status is non-zero")
    func damagedDatabaseIsReportedToSystemd() async throws {
        let notify = try NotifySocketFixture()
        let directory =
            "\(TestTemporaryDirectory.path)/mentory-startup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let garbage = Data("not a database: a diary in plain text\n".utf8)
        try garbage.write(to: URL(fileURLWithPath: directory + "/mentoryd.sqlite"))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ProductBinaries.path(of: "mentoryd"))
        process.arguments = ["--socket", directory + "/mentoryd.sock", "--state-dir", directory]
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("MENTORYD_") }
        environment["NOTIFY_SOCKET"] = notify.address
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try await process.runTiedToTestProcess()

        #expect(await process.waitForExit() != 0)
        var datagrams: [String] = []
        while notify.hasPendingDatagram(), let datagram = await notify.receive() { datagrams.append(datagram) }
        let status = try #require(datagrams.first { $0.hasPrefix("STATUS=") }, "datagrams: \(datagrams)")
        #expect(status.contains("Failed to start"))
        #expect(status.contains("damaged"))
        #expect(!datagrams.contains { $0.contains("READY=1") })
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/mentoryd.sqlite")) == garbage)
    }

    @Test(
        "socket-activated with a broken config, mentoryd stays up, tells every client why, and exits 0 on SIGTERM",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate"))
    )
    func brokenConfigIsServedAsStartupFailure() async throws {
        let fixture = try ActivationFixture()
        // A JSON syntax error on line 3: a bare word where a value belongs.
        try "{\n  \"limits\": {\n    \"maxConnections\": five\n  }\n}\n".write(
            toFile: fixture.configPath, atomically: true, encoding: .utf8)
        let process = try await fixture.launch()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // Every connection, not only the one that started it, gets the same answer.
        for attempt in 1...3 {
            let connection = try RawConnection(path: fixture.socketPath)
            var envelope = Mentory_V1_Envelope()
            envelope.hello.protocolVersion = WireProtocol.version
            envelope.hello.clientName = "startup-failure-\(attempt)"
            try connection.send(envelope)
            let reply = try connection.receiveEnvelope()
            guard case .connectionError(let error) = reply.kind else {
                Issue.record("expected a ConnectionError, got \(reply)")
                return
            }
            #expect(error.closing)
            #expect(error.error.code == UInt32(Mentory_V1_ErrorCode.startupFailed.rawValue))
            #expect(error.error.message.contains(fixture.configPath), "\(error.error.message)")
            #expect(error.error.message.contains("line 3"), "\(error.error.message)")
            #expect(error.error.message.contains("restart"), "\(error.error.message)")
            #expect(process.isRunning)
        }

        // (mentoryctl's exit status 69 for this answer is checked by scripts/systemd-test.sh: a
        // Foundation Process spawned while the activated daemon runs is not reaped until it exits.)
        kill(process.processIdentifier, SIGTERM)
        #expect(try await waitForExit(process) == 0)
    }

    @Test(
        "socket-activated with a misspelled key, mentoryd stays up and tells clients the key and the nearest known one",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate"))
    )
    func misspelledKeyIsServedAsStartupFailure() async throws {
        let fixture = try ActivationFixture()
        try #"{"limits": {"maxConections": 5}}"#.write(toFile: fixture.configPath, atomically: true, encoding: .utf8)
        let process = try await fixture.launch()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        let connection = try RawConnection(path: fixture.socketPath)
        var envelope = Mentory_V1_Envelope()
        envelope.hello.protocolVersion = WireProtocol.version
        envelope.hello.clientName = "misspelled-key"
        try connection.send(envelope)
        let reply = try connection.receiveEnvelope()
        guard case .connectionError(let error) = reply.kind else {
            Issue.record("expected a ConnectionError, got \(reply)")
            return
        }
        #expect(error.error.code == UInt32(Mentory_V1_ErrorCode.startupFailed.rawValue))
        #expect(error.error.message.contains(fixture.configPath), "\(error.error.message)")
        #expect(
            error.error.message.contains("unknown key limits.maxConections (did you mean limits.maxConnections?)"),
            "\(error.error.message)")
        #expect(process.isRunning)
        kill(process.processIdentifier, SIGTERM)
        #expect(try await waitForExit(process) == 0)
    }

    @Test("started by hand with a broken config, mentoryd names the file and exits 78")
    func brokenConfigByHandExits78() async throws {
        let directory =
            "\(TestTemporaryDirectory.path)/mentory-startup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = directory + "/broken.json"
        try "{\"log\": {\"level\": \"loud\"}}".write(toFile: config, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ProductBinaries.path(of: "mentoryd"))
        process.arguments = [
            "--socket", directory + "/mentoryd.sock", "--state-dir", directory + "/state", "--config", config,
        ]
        process.environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("MENTORYD_") && $0.key != "NOTIFY_SOCKET"
        }
        let logPath = directory + "/mentoryd.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try await process.runTiedToTestProcess()
        #expect(try await waitForExit(process, seconds: 30) == 78)
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        #expect(log.contains(config), "\(log)")
        #expect(log.contains("log.level"), "\(log)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/state"), "nothing was opened")
    }
}
