import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import Synchronization
import Testing

/// A plugin namespace for tests, declared by hand the way protoc-gen-mentory would generate it,
/// over messages mentory.proto already declares.
enum EchoPluginSchema: NamespaceSchema {
    static let name = "echo"
    static let version: UInt32 = 1
    static let say = MethodSchema<EchoPluginSchema, Mentory_V1_MentorSetRequest, Mentory_V1_MentorState>(name: "say")
    static let echoes = TopicSchema<EchoPluginSchema, Mentory_V1_MentorState, Mentory_V1_MentorState>(
        name: "echoes", reads: ["echo.say"])
    static let methods: [MethodInfo] = [say.info]
    static let topics: [TopicInfo] = [echoes.info]
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// Whether the test plugin's `say` answers at once or stalls until cancelled.
final class EchoBehaviour: Sendable {
    let stalls = Atomic<Bool>(false)
    /// `say` fails CONFLICT with reason `echo.refused`.
    let refuses = Atomic<Bool>(false)
    let calls = Atomic<Int>(0)
    let snapshots = Atomic<Int>(0)
}

/// An SDK plugin serving `echo` from the test process, running until stopped.
struct RunningPlugin {
    let plugin: MentoryPlugin<EchoPluginSchema>
    let task: Task<Void, any Error>
    let behaviour: EchoBehaviour

    static func start(
        socketPath: String, behaviour: EchoBehaviour = EchoBehaviour(), reconnect: ReconnectPolicy = ReconnectPolicy()
    ) throws -> RunningPlugin {
        var routes = PluginRoutes<EchoPluginSchema>()
        routes.on(EchoPluginSchema.say) { request, _ in
            behaviour.calls.add(1, ordering: .relaxed)
            if behaviour.refuses.load(ordering: .relaxed) {
                throw PluginError(code: .conflict, message: "echo refuses today", reason: "echo.refused")
            }
            if behaviour.stalls.load(ordering: .relaxed) {
                try await Task.sleep(for: .seconds(3600))
            }
            var state = Mentory_V1_MentorState()
            state.message.content = "echo: " + request.content
            return state
        }
        routes.snapshot(EchoPluginSchema.echoes) {
            let count = behaviour.snapshots.add(1, ordering: .relaxed).newValue
            var state = Mentory_V1_MentorState()
            state.message.content = "snapshot \(count)"
            return state
        }
        let plugin = try MentoryPlugin(socketPath: socketPath, routes: routes, reconnect: reconnect)
        let task = Task { try await plugin.run() }
        return RunningPlugin(plugin: plugin, task: task, behaviour: behaviour)
    }

    /// Waits until the plugin has registered `count` times in all.
    func registered(times count: Int = 1) async {
        var seen = 0
        for await state in self.plugin.states {
            if case .registered = state {
                seen += 1
                if seen == count { return }
            }
        }
    }

    func stop() async {
        self.task.cancel()
        _ = await self.task.result
    }
}

@Suite("Plugins against the real daemon", .timeLimit(.minutes(10)))
struct PluginEndToEndTests {
    /// The plugin answers from this test process, which shares two cores with the rest of the suite: its
    /// answers get the longest wait a test should need rather than the default 5 s (tooSlow sets its own).
    static let environment = [
        "MENTORYD_STORAGE_BACKEND": "memory", "MENTORYD_LIMITS_PLUGIN_CALL_TIMEOUT_MILLISECONDS": "120000",
    ]
    /// Declares plugin `echo`: its `plugins.echo` section.
    static let config = #"{"plugins": {"echo": {}}}"#

    static func code(of call: () async throws -> Void) async -> (Mentory_V1_ErrorCode?, String) {
        do {
            try await call()
            return (nil, "")
        } catch let error as MentoryClientError {
            if case .remote(_, let message, _) = error { return (error.remoteCode, message) }
            return (nil, "\(error)")
        } catch {
            return (nil, "\(error)")
        }
    }

    static func say(_ client: MentoryClient, _ text: String) async throws(MentoryClientError) -> String {
        try await client.call(EchoPluginSchema.say, Mentory_V1_MentorSetRequest.with { $0.content = text })
            .message.content
    }

    @Test(
        "absent, then registered: calls fail UNAVAILABLE until it registers, then reach it; status shows it"
    )
    func registerAndCall() async throws {
        let daemon = try await DaemonProcess(environment: Self.environment, config: Self.config)
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        let (absent, message) = await Self.code { _ = try await Self.say(client, "hi") }
        #expect(absent == .unavailable)
        #expect(message.contains("plugin 'echo' is not connected"), "\(message)")
        #expect(try await client.status().plugins.first?.state == .waiting)

        let plugin = try RunningPlugin.start(socketPath: daemon.socketPath)
        await plugin.registered()
        #expect(try await Self.say(client, "hi") == "echo: hi")
        let status = try await client.status()
        #expect(status.plugins.map(\.name) == ["echo"])
        #expect(status.plugins.first?.state == .connected)
        let ctlStatus = try await daemon.ctl(["status"])
        #expect(ctlStatus.stdout.contains("echo (echo): connected for"), "\(ctlStatus.stdout)")
        let described = try await client.call(
            MentorySchema.Session.describe, Mentory_V1_DescribeRequest.with { $0.namespace = "echo" })
        #expect(described.namespaces.first?.methods.map(\.name) == ["say"])

        // Publishing through the daemon: sequence numbers are the daemon's.
        _ = try await client.subscribe(topics: ["echoes"])
        var events = client.events.makeAsyncIterator()
        #expect(await events.next()?.kind == .snapshot)
        try await plugin.plugin.publish(EchoPluginSchema.echoes, Mentory_V1_MentorState())
        let change = await events.next()
        #expect(change?.kind == .change)
        #expect(change?.sequence == 1)

        await plugin.stop()
        await client.close()
        #expect(await daemon.stop() == 0)
        #expect(daemon.log.contains("plugin registered"))
    }

    @Test("an error's reason reaches mentoryctl: after the message, and in --json on stdout")
    func reasonInCtl() async throws {
        let daemon = try await DaemonProcess(environment: Self.environment, config: Self.config)
        defer { daemon.removeFiles() }
        let plugin = try RunningPlugin.start(socketPath: daemon.socketPath)
        await plugin.registered()
        plugin.behaviour.refuses.store(true, ordering: .relaxed)
        // The plugin answers from this test process's task pool, which the suite's other tests keep busy
        // (ThreadSanitizer on two busy cores took the first answer past mentoryctl's default 30 s): mentoryctl
        // waits as long as the daemon waits for the plugin (MENTORYD_LIMITS_PLUGIN_CALL_TIMEOUT_MILLISECONDS).
        let timeout = ["--timeout", "120"]
        let plain = try await daemon.ctl(timeout + ["call", "echo.say", #"{"content": "hi"}"#])
        #expect(plain.status == 1)
        #expect(plain.stderr.contains("echo refuses today (reason echo.refused)"), "\(plain.stderr)")
        let json = try await daemon.ctl(timeout + ["--json", "call", "echo.say", #"{"content": "hi"}"#])
        #expect(json.status == 1)
        let error = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: [String: Any]]
        #expect(error?["error"]?["reason"] as? String == "echo.refused", "\(json.stdout)")
        #expect(error?["error"]?["code"] as? Int == Int(Mentory_V1_ErrorCode.conflict.rawValue))
        await plugin.stop()
        #expect(await daemon.stop() == 0)
    }

    @Test("a plugin that does not answer: DEADLINE_EXCEEDED at limits.pluginCallTimeoutMilliseconds; others go on")
    func tooSlow() async throws {
        var environment = Self.environment
        environment["MENTORYD_LIMITS_PLUGIN_CALL_TIMEOUT_MILLISECONDS"] = "300"
        let daemon = try await DaemonProcess(environment: environment, config: Self.config)
        defer { daemon.removeFiles() }
        let plugin = try RunningPlugin.start(socketPath: daemon.socketPath)
        await plugin.registered()
        plugin.behaviour.stalls.store(true, ordering: .relaxed)
        let client = try await daemon.client()
        let (code, message) = await Self.code { _ = try await Self.say(client, "hello?") }
        #expect(code == .deadlineExceeded)
        #expect(message.contains("echo.say"), "\(message)")
        // The daemon and its other namespaces were never blocked.
        try await client.ping()
        _ = try await client.mentorGet()
        await plugin.stop()
        await client.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("a plugin gone mid-call: UNAVAILABLE at once; it re-registers by itself and subscribers get a reset")
    func goneAndRestarted() async throws {
        let daemon = try await DaemonProcess(environment: Self.environment, config: Self.config)
        defer { daemon.removeFiles() }
        let plugin = try RunningPlugin.start(socketPath: daemon.socketPath)
        await plugin.registered()
        let subscriber = try await daemon.client("subscriber")
        _ = try await subscriber.subscribe(topics: ["echoes"])
        var events = subscriber.events.makeAsyncIterator()
        #expect(await events.next()?.kind == .snapshot)

        plugin.behaviour.stalls.store(true, ordering: .relaxed)
        let client = try await daemon.client()
        async let outcome = Self.code { _ = try await Self.say(client, "are you there") }
        // Drop the plugin's connection once the call reached it (the SDK reconnects by itself).
        try await waitUntil("the call reaches the plugin") { plugin.behaviour.calls.load(ordering: .relaxed) > 0 }
        plugin.behaviour.stalls.store(false, ordering: .relaxed)
        await plugin.plugin.client?.close()
        let (code, message) = await outcome
        #expect(code == .unavailable)
        #expect(message.contains("disconnected while the call was in flight"), "\(message)")

        await plugin.registered(times: 1)
        let reset = await events.next()
        #expect(reset?.kind == .reset)
        #expect(try Mentory_V1_MentorState(serializedBytes: reset?.body ?? Data()).message.content == "snapshot 2")
        #expect(try await Self.say(client, "back") == "echo: back")
        await plugin.stop()
        await client.close()
        await subscriber.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("across a daemon restart the plugin re-registers by itself")
    func daemonRestart() async throws {
        let first = try await DaemonProcess(environment: Self.environment, config: Self.config)
        defer { first.removeFiles() }
        let socketPath = first.socketPath
        let plugin = try RunningPlugin.start(socketPath: socketPath)
        await plugin.registered()
        #expect(await first.stop() == 0)
        let second = try await DaemonProcess(socketPath: socketPath, environment: Self.environment, config: Self.config)
        defer { second.removeFiles() }
        await plugin.registered()
        let client = try await second.client()
        #expect(try await Self.say(client, "again") == "echo: again")
        await plugin.stop()
        await client.close()
        #expect(await second.stop() == 0)
    }

    @Test(
        "after a restart the plugin is back at once: quick retries after a lost registration, not the back-off grown meanwhile"
    )
    func promptReconnect() async throws {
        let first = try await DaemonProcess(environment: Self.environment, config: Self.config)
        defer { first.removeFiles() }
        let socketPath = first.socketPath
        // A back-off of 10 minutes: a plugin that waited for it would not answer within this test's bounds.
        var policy = ReconnectPolicy(initialDelay: .seconds(600), maximumDelay: .seconds(600))
        policy.quickRetryWindow = .seconds(300)
        let plugin = try RunningPlugin.start(socketPath: socketPath, reconnect: policy)
        await plugin.registered()
        #expect(await first.stop() == 0)
        // The daemon stays down long enough for the default back-off to have grown past 2 s
        // (1 s, then 2 s): the plugin keeps trying every quarter of a second meanwhile.
        try await Task.sleep(for: .seconds(3))
        let second = try await DaemonProcess(socketPath: socketPath, environment: Self.environment, config: Self.config)
        defer { second.removeFiles() }
        let ready = ContinuousClock.now
        let client = try await second.client()
        var answered = false
        try await waitUntil("the plugin answers on the restarted daemon", timeout: .seconds(120)) {
            answered = (try? await Self.say(client, "again")) == "echo: again"
            return answered
        }
        print(
            "prompt reconnect: the plugin answered \(ContinuousClock.now - ready) after the restarted daemon was ready")
        #expect(answered)
        await plugin.stop()
        await client.close()
        #expect(await second.stop() == 0)
    }

    @Test("a plugin whose namespace nothing declares waits, connected; a reload declaring it brings it up, no restart")
    func declaredByReload() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"], config: "{}")
        defer { daemon.removeFiles() }
        let plugin = try RunningPlugin.start(socketPath: daemon.socketPath)
        try await waitUntil("mentoryd refuses the undeclared plugin", timeout: .seconds(60)) {
            daemon.log.contains("plugin.register(echo)")
        }
        let client = try await daemon.client()
        let (before, _) = await Self.code { _ = try await Self.say(client, "hi") }
        #expect(before == .unknownNamespace)

        try Self.config.write(toFile: daemon.directory + "/mentoryd.json", atomically: true, encoding: .utf8)
        let pid = daemon.pid
        let reload = try await daemon.ctl(["reload"])
        #expect(reload.status == 0, "\(reload.stderr)")
        var answered = false
        try await waitUntil("the plugin serves after the reload", timeout: .seconds(60)) {
            answered = (try? await Self.say(client, "declared")) == "echo: declared"
            return answered
        }
        #expect(answered)
        #expect(daemon.isRunning && daemon.pid == pid, "the same daemon process, never restarted")
        #expect(daemon.log.contains("plugin declared: echo"), "\(daemon.log)")
        await plugin.stop()
        await client.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("a registration refused for the plugin's own fault: mentoryctl status shows it failed, with the reason")
    func failedRegistration() async throws {
        let daemon = try await DaemonProcess(environment: Self.environment, config: Self.config)
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        var request = Mentory_V1_PluginRegisterRequest()
        request.pluginProtocolVersion = WireProtocol.pluginProtocolVersion + 1
        request.namespace = "echo"
        let (refused, _) = await Self.code { _ = try await client.call(MentorySchema.Plugin.register, request) }
        #expect(refused == .invalidArgument)
        let ctlStatus = try await daemon.ctl(["status"])
        #expect(ctlStatus.stdout.contains("echo (echo): failed for"), "\(ctlStatus.stdout)")
        #expect(ctlStatus.stdout.contains("is not supported"), "\(ctlStatus.stdout)")
        let (unavailable, message) = await Self.code { _ = try await Self.say(client, "hi") }
        #expect(unavailable == .unavailable)
        #expect(message.contains("plugin 'echo' failed to register"), "\(message)")
    }

    @Test("a dependency cycle through a plugin fails start-up with exit status 78, naming the chain")
    func cycle() async throws {
        let result = try await HandlerConfigurationTests.runDaemonToExit(
            environment: ["MENTORYD_PLUGINS_ECHO_REQUIRES": "diary", "MENTORYD_HANDLERS_DIARY_REQUIRES": "echo"],
            config: Self.config)
        #expect(result.status == 78)
        #expect(result.stderr.contains("diary -> echo -> diary"), "\(result.stderr)")
    }
}
