import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOConcurrencyHelpers
import SwiftProtobuf
import Synchronization
import Testing

/// A plugin's connection in memory: records the calls forwarded to it and events sent to it.
final class PluginSink: EventSink {
    let accepting = Atomic<Bool>(true)
    let calls: AsyncStream<Mentory_V1_PluginCall>
    private let continuation: AsyncStream<Mentory_V1_PluginCall>.Continuation
    /// Every call forwarded so far, for a test that must not wait for one that may never come.
    private let forwarded = NIOLockedValueBox<[Mentory_V1_PluginCall]>([])

    init() {
        (self.calls, self.continuation) = AsyncStream.makeStream(of: Mentory_V1_PluginCall.self)
    }

    /// Why the engine closed this connection, if it did.
    var closedBecause: MentoryError? { self.closed.withLockedValue { $0 } }
    private let closed = NIOLockedValueBox<MentoryError?>(nil)

    func close(because error: MentoryError) {
        self.closed.withLockedValue { $0 = error }
    }

    /// Responses of suspended requests are read from their task (`MentoryEngine.respond(to:from:)`).
    func answer(_ response: consuming OutboundResponse) {}

    func deliver(_ event: SharedEvent) -> Bool { true }

    func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool {
        guard self.accepting.load(ordering: .relaxed) else { return false }
        self.forwarded.withLockedValue { $0.append(pluginCall) }
        self.continuation.yield(pluginCall)
        return true
    }

    /// The calls forwarded so far, without waiting.
    var forwardedSoFar: [Mentory_V1_PluginCall] { self.forwarded.withLockedValue { $0 } }

    /// The next call forwarded to the plugin; `nil` when none comes within 120 s, so that a call never forwarded
    /// fails the test rather than hanging the suite.
    func nextCall() async -> Mentory_V1_PluginCall? {
        let calls = self.calls
        return await withTaskGroup(of: Mentory_V1_PluginCall?.self) { group in
            group.addTask {
                for await call in calls { return call }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(120))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

/// A plugin connected to an engine in memory.
struct TestPlugin {
    let id: ConnectionID
    let sink: PluginSink
}

@Suite("Plugins in the engine")
struct PluginTests {
    static let root = PeerCredentials(pid: 42, uid: 0, gid: 0)
    static let declaration = PluginDeclaration(name: "advisor", namespace: "advisor")

    /// A registration of namespace `advisor`: `suggest(MentorSetRequest) returns (MentorState)` and topic `advice`.
    static func registration(namespace: String = "advisor") -> Mentory_V1_PluginRegisterRequest {
        var request = Mentory_V1_PluginRegisterRequest()
        request.pluginProtocolVersion = WireProtocol.pluginProtocolVersion
        request.namespace = namespace
        request.version = 1
        var method = Mentory_V1_MethodDescription()
        method.name = "suggest"
        method.request = "mentory.v1.MentorSetRequest"
        method.reply = "mentory.v1.MentorState"
        request.methods = [method]
        var topic = Mentory_V1_TopicDescription()
        topic.name = "advice"
        topic.change = "mentory.v1.MentorState"
        topic.snapshot = "mentory.v1.MentorState"
        topic.reads = ["\(namespace).suggest"]
        request.topics = [topic]
        return request
    }

    static func fixture(
        plugins: [PluginDeclaration] = [declaration],
        accessPolicy: AccessPolicy = .default,
        pluginCallTimeout: Duration = .seconds(5),
        requestTimeout: Duration = .seconds(30),
        onEventLoop: Bool = false
    ) async throws -> EngineFixture {
        let fixture = try await EngineFixture(
            accessPolicy: accessPolicy, pluginCallTimeout: pluginCallTimeout, requestTimeout: requestTimeout,
            onEventLoop: onEventLoop)
        for plugin in plugins {
            try await fixture.engine.declarePlugin(plugin)
        }
        return fixture
    }

    /// Connects a plugin as root and registers it.
    static func connectPlugin(
        _ fixture: EngineFixture,
        namespace: String = "advisor",
        expectedCallTimeoutMs: UInt32 = 5000
    ) async throws -> TestPlugin {
        let (id, sink) = await Self.attachPlugin(fixture)
        let reply = try await fixture.call(
            WireNames.plugin, "register", Self.registration(namespace: namespace), from: id,
            as: Mentory_V1_PluginRegisterReply.self)
        #expect(reply.plugin == "advisor")
        #expect(reply.callTimeoutMs == expectedCallTimeoutMs)
        return TestPlugin(id: id, sink: sink)
    }

    static func attachPlugin(
        _ fixture: EngineFixture,
        credentials: PeerCredentials? = root
    ) async -> (ConnectionID, PluginSink) {
        let id = ConnectionID(UInt64.random(in: 1_000_000...UInt64.max))
        let sink = PluginSink()
        _ = await fixture.engine.attach(
            ConnectionContext(id: id, clientName: "plugin", credentials: credentials), sink: sink)
        return (id, sink)
    }

    static func suggest(
        _ fixture: EngineFixture,
        from id: ConnectionID,
        timeoutMs: UInt32 = 0
    ) async throws -> Mentory_V1_Response {
        var request = Mentory_V1_Request()
        request.id = 7
        request.namespace = "advisor"
        request.method = "suggest"
        request.body = try Mentory_V1_MentorSetRequest.make("hello").serializedData()
        request.timeoutMs = timeoutMs
        return await fixture.engine.respond(to: request, from: id)
    }

    static func reply(_ call: Mentory_V1_PluginCall, content: String) throws -> Mentory_V1_PluginReply {
        var state = Mentory_V1_MentorState()
        state.message.content = content
        var reply = Mentory_V1_PluginReply()
        reply.callID = call.callID
        reply.body = try state.serializedData()
        return reply
    }

    @Test("under a user instance, the UNAVAILABLE hint names the user manager's command")
    func userInstanceHint() async throws {
        var instance = Mentory_V1_DaemonInstance()
        instance.kind = .user
        let fixture = try await EngineFixture(instance: instance)
        try await fixture.engine.declarePlugin(Self.declaration)
        let (client, _) = await fixture.connect()
        let response = try await Self.suggest(fixture, from: client)
        #expect(response.error.message.contains("e.g. systemctl --user start mentoryd-plugin@advisor"))
    }

    @Test("a call to a declared plugin that is not connected fails at once with UNAVAILABLE naming it and since when")
    func absent() async throws {
        let fixture = try await Self.fixture()
        let (client, _) = await fixture.connect()
        let response = try await Self.suggest(fixture, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
        #expect(response.error.message.contains("plugin 'advisor' is not connected"))
        #expect(response.error.message.contains("waiting since"))
        #expect(response.error.message.contains("e.g. systemctl start mentoryd-plugin@advisor"))
        let status = await fixture.engine.status()
        #expect(status.plugins.map(\.name) == ["advisor"])
        #expect(status.plugins.first?.state == .waiting)
    }

    @Test("only root or the daemon's user may register, and only a declared namespace; others are refused")
    func refusedRegistrations() async throws {
        let fixture = try await Self.fixture()
        let (stranger, _) = await Self.attachPlugin(fixture, credentials: PeerCredentials(pid: 9, uid: 1000, gid: 1000))
        #expect(
            try await fixture.failure(WireNames.plugin, "register", Self.registration(), from: stranger)
                == .permissionDenied)
        let (unknown, _) = await Self.attachPlugin(fixture, credentials: nil)
        #expect(
            try await fixture.failure(WireNames.plugin, "register", Self.registration(), from: unknown)
                == .permissionDenied)
        let (rootPlugin, _) = await Self.attachPlugin(fixture)
        let undeclared = try await fixture.send(
            WireNames.plugin, "register", Self.registration(namespace: "oracle"), from: rootPlugin)
        #expect(undeclared.error.code == UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue))
        #expect(undeclared.error.message.contains("advisor (advisor)"))
        var lacking = Self.registration()
        lacking.methods[0].reply = "example.Missing"
        #expect(try await fixture.failure(WireNames.plugin, "register", lacking, from: rootPlugin) == .invalidArgument)
        var future = Self.registration()
        future.pluginProtocolVersion = 2
        #expect(try await fixture.failure(WireNames.plugin, "register", future, from: rootPlugin) == .invalidArgument)
    }

    @Test("a refused registration fails the plugin with its reason; a stranger's changes nothing; then it connects")
    func failedRegistration() async throws {
        let fixture = try await Self.fixture()
        let (plugin, _) = await Self.attachPlugin(fixture)
        var lacking = Self.registration()
        lacking.methods[0].reply = "example.Missing"
        #expect(try await fixture.failure(WireNames.plugin, "register", lacking, from: plugin) == .invalidArgument)
        let failed = try #require(await fixture.engine.status().plugins.first)
        #expect(failed.state == .failed)
        #expect(failed.reason.contains("example.Missing"))

        let (client, _) = await fixture.connect()
        let response = try await Self.suggest(fixture, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
        #expect(response.error.message.contains("plugin 'advisor' failed to register"))
        #expect(response.error.message.contains("example.Missing"))
        #expect(response.error.message.contains("failed since"))

        // A stranger cannot overwrite the state or its reason, even with a registration that is itself bad.
        let (stranger, _) = await Self.attachPlugin(fixture, credentials: PeerCredentials(pid: 9, uid: 1000, gid: 1000))
        var future = Self.registration()
        future.pluginProtocolVersion = 2
        #expect(try await fixture.failure(WireNames.plugin, "register", future, from: stranger) == .permissionDenied)
        #expect(try await fixture.failure(WireNames.plugin, "register", lacking, from: stranger) == .permissionDenied)
        await fixture.engine.detach(stranger)
        #expect(await fixture.engine.status().plugins.first == failed)

        _ = try await fixture.call(
            WireNames.plugin, "register", Self.registration(), from: plugin, as: Mentory_V1_PluginRegisterReply.self)
        let connected = try #require(await fixture.engine.status().plugins.first)
        #expect(connected.state == .connected)
        #expect(connected.reason.isEmpty)
    }

    @Test("a failed plugin stays failed when that connection closes; a connected one is never made failed")
    func failedThenGone() async throws {
        let fixture = try await Self.fixture()
        let (first, _) = await Self.attachPlugin(fixture)
        var future = Self.registration()
        future.pluginProtocolVersion = 2
        #expect(try await fixture.failure(WireNames.plugin, "register", future, from: first) == .invalidArgument)
        let failed = try #require(await fixture.engine.pluginStatuses.first)
        #expect(failed.state == .failed)
        #expect(failed.reason.contains("plugin protocol version 2 is not supported"))
        await fixture.engine.detach(first)
        let stillFailed = try #require(await fixture.engine.pluginStatuses.first)
        #expect(stillFailed.state == .failed, "the reason outlives the refused connection")
        #expect(stillFailed.reason == failed.reason)

        let plugin = try await Self.connectPlugin(fixture)
        #expect(try await fixture.failure(WireNames.plugin, "register", future, from: plugin.id) == .invalidArgument)
        let (second, _) = await Self.attachPlugin(fixture)
        #expect(try await fixture.failure(WireNames.plugin, "register", future, from: second) == .conflict)
        #expect(await fixture.engine.pluginStatuses.first?.state == .connected)
    }

    @Test("a failure reason longer than the limit is cut at a character boundary")
    func boundedReason() {
        let long = String(repeating: "é", count: WireProtocol.maxPluginFailureReasonBytes)
        let cut = MentoryEngine.bounded(long, bytes: WireProtocol.maxPluginFailureReasonBytes)
        #expect(cut.utf8.count <= WireProtocol.maxPluginFailureReasonBytes)
        #expect(cut.hasSuffix("…"))
        #expect(MentoryEngine.bounded("short", bytes: WireProtocol.maxPluginFailureReasonBytes) == "short")
    }

    @Test("an access rule may allow another uid to register")
    func allowedByRule() async throws {
        let policy = try AccessPolicy(parsing: ["allow uid=1000 plugin.*", "deny any debug.* storage.*"])
        let fixture = try await Self.fixture(accessPolicy: policy)
        let (plugin, _) = await Self.attachPlugin(fixture, credentials: PeerCredentials(pid: 9, uid: 1000, gid: 1000))
        let reply = try await fixture.call(
            WireNames.plugin, "register", Self.registration(), from: plugin, as: Mentory_V1_PluginRegisterReply.self)
        #expect(reply.plugin == "advisor")
    }

    @Test("a call is forwarded with its caller and deadline, and the plugin's answer is the reply")
    func forwarded() async throws {
        // Only the plugin's answers may end these calls, however slow the machine (ThreadSanitizer).
        let fixture = try await Self.fixture(pluginCallTimeout: .seconds(600))
        let plugin = try await Self.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let (client, _) = await fixture.connect(name: "alice", credentials: PeerCredentials(pid: 5, uid: 1001, gid: 7))
        async let response = Self.suggest(fixture, from: client, timeoutMs: 60_000)
        let call = try #require(await plugin.sink.nextCall())
        #expect(call.namespace == "advisor")
        #expect(call.method == "suggest")
        #expect(
            call.caller.known && call.caller.uid == 1001 && call.caller.pid == 5 && call.caller.clientName == "alice")
        #expect(call.timeoutMs > 0 && call.timeoutMs <= 60_000, "the request's own deadline, under the cap")
        #expect(try Mentory_V1_MentorSetRequest(serializedBytes: call.body).content == "hello")
        await fixture.engine.pluginReply(try Self.reply(call, content: "breathe"), from: plugin.id)
        let answer = try await response
        #expect(try Mentory_V1_MentorState(serializedBytes: answer.body).message.content == "breathe")

        // An error answer reaches the caller as the plugin wrote it.
        async let failed = Self.suggest(fixture, from: client)
        let second = try #require(await plugin.sink.nextCall())
        var reply = Mentory_V1_PluginReply()
        reply.callID = second.callID
        reply.error = Mentory_V1_Error(code: .notFound, message: "no advice for that")
        reply.error.reason = "advisor.no_advice"
        await fixture.engine.pluginReply(reply, from: plugin.id)
        let error = try await failed.error
        #expect(error.code == UInt32(Mentory_V1_ErrorCode.notFound.rawValue))
        #expect(error.reason == "advisor.no_advice")
    }

    @Test(
        "a call the plugin does not answer fails DEADLINE_EXCEEDED at the request's deadline; a late answer is dropped",
        arguments: [false, true])
    func tooSlow(onEventLoop: Bool) async throws {
        // The deadline is a timer of the engine's background jobs, or, on an event loop, the loop's scheduled task.
        let fixture = try await Self.fixture(onEventLoop: onEventLoop)
        let plugin = try await Self.connectPlugin(fixture)
        let (client, _) = await fixture.connect()
        let response = try await Self.suggest(fixture, from: client, timeoutMs: 100)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.deadlineExceeded.rawValue))
        #expect(response.error.message.contains("advisor.suggest"))
        // On a slow machine (ThreadSanitizer) the 100 ms may pass before the call is forwarded at all; one that was
        // forwarded was queued before the reply came back, so it is here now, and its late answer is dropped.
        if let call = plugin.sink.forwardedSoFar.first {
            await fixture.engine.pluginReply(try Self.reply(call, content: "late"), from: plugin.id)
        }
        #expect(await fixture.engine.pluginStatuses.first?.callsInFlight == 0)
    }

    @Test("when the plugin disconnects, every call in flight to it fails UNAVAILABLE at once")
    func gone() async throws {
        // Only the disconnect may end these calls, however slow the machine (ThreadSanitizer): no deadline is near.
        let fixture = try await Self.fixture(pluginCallTimeout: .seconds(600))
        let plugin = try await Self.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let (client, _) = await fixture.connect()
        async let first = Self.suggest(fixture, from: client, timeoutMs: 600_000)
        async let second = Self.suggest(fixture, from: client, timeoutMs: 600_000)
        _ = await plugin.sink.nextCall()
        _ = await plugin.sink.nextCall()
        #expect(await fixture.engine.pluginStatuses.first?.callsInFlight == 2)
        await fixture.engine.detach(plugin.id)
        for response in try await [first, second] {
            #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
            #expect(response.error.message.contains("disconnected while the call was in flight"))
        }
        let status = try #require(await fixture.engine.pluginStatuses.first)
        #expect(status.state == .waiting)
        #expect(status.callsInFlight == 0)
    }

    @Test("a hung plugin blocks neither the engine nor other namespaces, and its full queue refuses calls")
    func isolated() async throws {
        // Only the disconnect may end the hung call, however slow the machine (ThreadSanitizer).
        let fixture = try await Self.fixture(pluginCallTimeout: .seconds(600))
        let plugin = try await Self.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let (client, _) = await fixture.connect()
        async let hung = Self.suggest(fixture, from: client, timeoutMs: 600_000)
        _ = await plugin.sink.nextCall()
        // The engine goes on serving while the call waits.
        let state = try await fixture.call(
            WireNames.mentor, "set", Mentory_V1_MentorSetRequest.make("still here"), from: client,
            as: Mentory_V1_MentorState.self)
        #expect(state.message.content == "still here")
        // The plugin's queue is full: calls fail at once rather than pile up.
        plugin.sink.accepting.store(false, ordering: .relaxed)
        let refused = try await Self.suggest(fixture, from: client, timeoutMs: 600_000)
        #expect(refused.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
        #expect(refused.error.message.contains("queue is full"))
        await fixture.engine.detach(plugin.id)
        #expect(try await hung.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
    }

    @Test("subscribers survive a plugin restart and get a reset when it registers again; sequences continue")
    func restarted() async throws {
        let fixture = try await Self.fixture()
        let plugin = try await Self.connectPlugin(fixture)
        var change = Mentory_V1_PluginPublishRequest()
        change.topic = "advice"
        change.body = try Mentory_V1_MentorSetRequest.make("first").serializedData()
        _ = try await fixture.call(WireNames.plugin, "publish", change, from: plugin.id, as: Mentory_V1_Empty.self)
        #expect(await fixture.engine.lastSequence(of: "advice") == 1)

        let (subscriber, events) = await fixture.connect()
        async let subscribed = fixture.subscribe(subscriber, to: ["advice"])
        let snapshotCall = try #require(await plugin.sink.nextCall())
        #expect(snapshotCall.snapshotTopic == "advice")
        #expect(snapshotCall.method.isEmpty)
        await fixture.engine.pluginReply(try Self.reply(snapshotCall, content: "snap"), from: plugin.id)
        _ = try await subscribed
        let snapshot = await events.next()
        #expect(snapshot.first?.kind == .snapshot)
        #expect(snapshot.first?.sequence == 1)

        await fixture.engine.detach(plugin.id)
        #expect(await fixture.engine.subscriberIDs(of: "advice") == [subscriber])

        let restarted = try await Self.connectPlugin(fixture)
        let resetCall = try #require(await restarted.sink.nextCall())
        #expect(resetCall.snapshotTopic == "advice")
        await fixture.engine.pluginReply(try Self.reply(resetCall, content: "after restart"), from: restarted.id)
        let reset = await events.next()
        #expect(reset.first?.kind == .reset)
        #expect(
            try Mentory_V1_MentorState(serializedBytes: reset.first?.body ?? Data()).message.content == "after restart")
        _ = try await fixture.call(WireNames.plugin, "publish", change, from: restarted.id, as: Mentory_V1_Empty.self)
        let next = await events.next()
        #expect(next.first?.kind == .change)
        #expect(next.first?.sequence == 2)
    }

    @Test("a second instance is refused while one is connected, and a plugin publishes only on its own topics")
    func conflictsAndTopics() async throws {
        let fixture = try await Self.fixture()
        let plugin = try await Self.connectPlugin(fixture)
        let (second, _) = await Self.attachPlugin(fixture)
        #expect(try await fixture.failure(WireNames.plugin, "register", Self.registration(), from: second) == .conflict)
        var foreign = Mentory_V1_PluginPublishRequest()
        foreign.topic = WireNames.diary
        #expect(try await fixture.failure(WireNames.plugin, "publish", foreign, from: plugin.id) == .invalidArgument)
        #expect(try await fixture.failure(WireNames.plugin, "publish", foreign, from: second) == .invalidArgument)
    }

    @Test("describe lists the plugin's namespace and descriptors; status shows it connected")
    func introspection() async throws {
        let fixture = try await Self.fixture()
        _ = try await Self.connectPlugin(fixture)
        let (client, _) = await fixture.connect()
        var request = Mentory_V1_DescribeRequest()
        request.namespace = "advisor"
        let described = try await fixture.call(
            WireNames.session, "describe", request, from: client, as: Mentory_V1_DescribeReply.self)
        #expect(described.namespaces.first?.methods.map(\.name) == ["suggest"])
        #expect(described.namespaces.first?.topics.map(\.name) == ["advice"])
        #expect(described.descriptors.file.contains { $0.name == "mentory.proto" })
        let status = try await fixture.call(
            WireNames.session, "status", Mentory_V1_Empty(), from: client, as: Mentory_V1_StatusReply.self)
        #expect(status.plugins.first?.state == .connected)
    }

    @Test("a plugin whose required plugin is not connected is UNAVAILABLE, naming the dependency")
    func dependencyDown() async throws {
        let fixture = try await Self.fixture(plugins: [
            PluginDeclaration(name: "advisor", namespace: "advisor", requires: ["oracle"]),
            PluginDeclaration(name: "oracle", namespace: "oracle"),
        ])
        _ = try await Self.connectPlugin(fixture)
        let (client, _) = await fixture.connect()
        let response = try await Self.suggest(fixture, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
        #expect(response.error.message.contains("requires 'oracle'"))
    }
}
