import Configuration
import Foundation
import Logging
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import SwiftProtobuf
import Synchronization
import Testing

/// A client's sink with a budget for the calls made on its behalf, as the server's per-uid account is:
/// `room` more calls may run at once.
final class BudgetedSink: EventSink {
    let room: Atomic<Int>
    let started = Atomic<Int>(0)
    let finished = Atomic<Int>(0)

    init(room: Int) {
        self.room = Atomic(room)
    }

    /// Responses of suspended requests are read from their task (`MentoryEngine.respond(to:from:)`).
    func answer(_ response: consuming OutboundResponse) {}

    func deliver(_ event: SharedEvent) -> Bool { true }

    func startCallOnBehalf() -> Bool {
        guard self.room.load(ordering: .relaxed) > 0 else { return false }
        self.room.subtract(1, ordering: .relaxed)
        self.started.add(1, ordering: .relaxed)
        return true
    }

    func finishCallOnBehalf() {
        self.room.add(1, ordering: .relaxed)
        self.finished.add(1, ordering: .relaxed)
    }
}

/// `probe.remaining` answers how many milliseconds its call has left before its deadline; `probe.nested`
/// asks `inner.remaining` the same on its caller's behalf, so a test sees the deadline a nested call got.
enum ProbeSchema: NamespaceSchema {
    static let name = "probe"
    static let version: UInt32 = 1
    static let remaining = MethodSchema<ProbeSchema, Mentory_V1_Empty, Google_Protobuf_Int64Value>(name: "remaining")
    static let nested = MethodSchema<ProbeSchema, Mentory_V1_Empty, Google_Protobuf_Int64Value>(name: "nested")
    static let expired = MethodSchema<ProbeSchema, Mentory_V1_Empty, Google_Protobuf_Int64Value>(name: "expired")
    static let methods: [MethodInfo] = [remaining.info, nested.info, expired.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

enum InnerProbeSchema: NamespaceSchema {
    static let name = "inner"
    static let version: UInt32 = 1
    static let remaining = MethodSchema<InnerProbeSchema, Mentory_V1_Empty, Google_Protobuf_Int64Value>(
        name: "remaining")
    static let methods: [MethodInfo] = [remaining.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// The milliseconds `call` has left.
func millisecondsLeft(_ call: RequestContext) -> Google_Protobuf_Int64Value {
    let left = call.deadline - ContinuousClock.now
    let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
    return Google_Protobuf_Int64Value(milliseconds)
}

struct InnerProbeHandler: MentoryHandler {
    typealias Namespace = InnerProbeSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.remaining) { _, call, _ in millisecondsLeft(call) }
    }
}

struct ProbeHandler: MentoryHandler {
    typealias Namespace = ProbeSchema
    var requires: [String] { ["inner"] }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.remaining) { _, call, _ in millisecondsLeft(call) }
        routes.onAsync(Namespace.nested) { _, call, context in
            try await context.call(InnerProbeSchema.remaining, Mentory_V1_Empty(), for: call)
        }
        // A call made for a context whose deadline has passed does not run.
        routes.onAsync(Namespace.expired) { _, call, context in
            let late = RequestContext(
                requestID: call.requestID, method: call.method, connection: call.connection,
                deadline: .now - .milliseconds(1), logger: call.logger)
            return try await context.call(InnerProbeSchema.remaining, Mentory_V1_Empty(), for: late)
        }
    }
}

@Suite("Calls on a caller's behalf count against its budget and share its deadline")
struct CallOnBehalfBudgetTests {
    private func fixture(requestTimeout: Duration = .seconds(30)) async throws -> EngineFixture {
        let fixture = try await EngineFixture(requestTimeout: requestTimeout)
        try await fixture.engine.register(InnerProbeHandler())
        try await fixture.engine.register(ProbeHandler())
        try await fixture.engine.register(MoodsHandler())
        try await fixture.engine.register(LoopHandler())
        return fixture
    }

    private func attach(_ fixture: EngineFixture, id: UInt64, sink: BudgetedSink) async -> ConnectionID {
        let connection = ConnectionID(1000 + id)
        _ = await fixture.engine.attach(
            ConnectionContext(
                id: connection, clientName: "budgeted", credentials: PeerCredentials(pid: 1, uid: 1001, gid: 1001)),
            sink: sink)
        return connection
    }

    private func request(_ namespace: String, _ method: String, timeoutMs: UInt32 = 0) -> Mentory_V1_Request {
        var request = Mentory_V1_Request()
        request.id = 1
        request.namespace = namespace
        request.method = method
        request.body = Data()
        request.timeoutMs = timeoutMs
        return request
    }

    @Test("a handler's call for a caller at its budget fails TOO_MANY_REQUESTS naming the call; with room it runs")
    func handlerCallOverBudget() async throws {
        let fixture = try await self.fixture()
        let full = BudgetedSink(room: 0)
        let client = await self.attach(fixture, id: 1, sink: full)
        let refused = try await fixture.send("moods", "entries", Mentory_V1_Empty(), from: client)
        #expect(refused.error.code == UInt32(Mentory_V1_ErrorCode.tooManyRequests.rawValue))
        #expect(refused.error.message.contains("moods -> diary.list"), "\(refused.error.message)")
        #expect(refused.error.message.contains("limits.uidRequestsInFlight"), "\(refused.error.message)")
        #expect(full.started.load(ordering: .relaxed) == 0)

        let roomy = BudgetedSink(room: 1)
        let other = await self.attach(fixture, id: 2, sink: roomy)
        let listed = try await fixture.call(
            "moods", "entries", Mentory_V1_Empty(), from: other, as: Mentory_V1_DiaryListReply.self)
        #expect(listed.entries.isEmpty)
        #expect(roomy.started.load(ordering: .relaxed) == 1, "the nested call took one of the caller's slots")
        #expect(roomy.finished.load(ordering: .relaxed) == 1, "and gave it back")
        #expect(roomy.room.load(ordering: .relaxed) == 1)
    }

    @Test("a plugin's plugin.call for a caller at its budget fails TOO_MANY_REQUESTS")
    func pluginCallOverBudget() async throws {
        let fixture = try await PluginTests.fixture()
        let plugin = try await PluginTests.connectPlugin(fixture)
        let full = BudgetedSink(room: 0)
        let client = await self.attach(fixture, id: 1, sink: full)
        async let suggested = PluginTests.suggest(fixture, from: client)
        let forwarded = try #require(await plugin.sink.nextCall())
        var request = Mentory_V1_PluginCallRequest()
        request.callID = forwarded.callID
        request.namespace = "diary"
        request.method = "list"
        request.body = try Mentory_V1_DiaryListRequest().serializedData()
        let response = try await fixture.send(WireNames.plugin, "call", request, from: plugin.id, id: 2)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.tooManyRequests.rawValue))
        #expect(response.error.message.contains("advisor -> diary.list"), "\(response.error.message)")
        await fixture.engine.pluginReply(try PluginTests.reply(forwarded, content: "done"), from: plugin.id)
        _ = try await suggested
    }

    @Test("a handler's nested call has its caller's deadline, not a fresh one")
    func handlerDeadlineInherited() async throws {
        // The daemon's default is ten minutes and the caller's 20 s, so a fresh deadline would show as more than
        // 20 s, while 20 s is room enough for the nested call however loaded the machine (ThreadSanitizer).
        let fixture = try await self.fixture(requestTimeout: .seconds(600))
        let client = await self.attach(fixture, id: 1, sink: BudgetedSink(room: 10))
        let response = await fixture.engine.respond(
            to: self.request("probe", "nested", timeoutMs: 20_000), from: client)
        guard case .body(let body) = response.result else {
            Issue.record("probe.nested failed: \(response.error.message)")
            return
        }
        let left = try Google_Protobuf_Int64Value(serializedBytes: body).value
        #expect(left > 0 && left <= 20_000, "the nested call saw \(left) ms left, of the caller's 20,000")
    }

    @Test("a nested call for a call whose deadline passed fails DEADLINE_EXCEEDED without running")
    func expiredDeadline() async throws {
        let fixture = try await self.fixture()
        let sink = BudgetedSink(room: 10)
        let client = await self.attach(fixture, id: 1, sink: sink)
        let response = await fixture.engine.respond(to: self.request("probe", "expired"), from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.deadlineExceeded.rawValue))
        #expect(sink.started.load(ordering: .relaxed) == 0)
    }

    @Test("a plugin's plugin.call runs with its caller's deadline, whatever the plugin's own request says")
    func pluginDeadlineInherited() async throws {
        // The caller's 20 s is room enough however slow the machine (ThreadSanitizer); the plugin's own request
        // would get the daemon's default of ten minutes, as would a fresh deadline.
        let fixture = try await PluginTests.fixture(pluginCallTimeout: .seconds(600), requestTimeout: .seconds(600))
        try await fixture.engine.register(InnerProbeHandler())
        let plugin = try await PluginTests.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let client = await self.attach(fixture, id: 1, sink: BudgetedSink(room: 10))
        async let suggested = PluginTests.suggest(fixture, from: client, timeoutMs: 20_000)
        let forwarded = try #require(await plugin.sink.nextCall())
        #expect(forwarded.timeoutMs <= 20_000)
        var request = Mentory_V1_PluginCallRequest()
        request.callID = forwarded.callID
        request.namespace = "inner"
        request.method = "remaining"
        // The plugin's own request has the default deadline; the nested call gets the caller's.
        let response = try await fixture.send(WireNames.plugin, "call", request, from: plugin.id, id: 2)
        await fixture.engine.pluginReply(try PluginTests.reply(forwarded, content: "done"), from: plugin.id)
        _ = try await suggested
        guard case .body(let body) = response.result else {
            Issue.record("plugin.call failed: \(response.error.message)")
            return
        }
        let reply = try Mentory_V1_PluginCallReply(serializedBytes: body)
        let left = try Google_Protobuf_Int64Value(serializedBytes: reply.body).value
        #expect(left > 0 && left <= 20_000, "the nested call saw \(left) ms left, of the caller's 20,000")
    }

    @Test("a handler's nested call into a plugin is cut at the caller's deadline, not the plugin call timeout")
    func pluginTargetBoundedByCallerDeadline() async throws {
        // Only the caller's deadline may end the call: the plugin call timeout is far off.
        let fixture = try await PluginTests.fixture(pluginCallTimeout: .seconds(600))
        try await fixture.engine.register(ForwardingHandler())
        let plugin = try await PluginTests.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let client = await self.attach(fixture, id: 1, sink: BudgetedSink(room: 10))
        async let answered = fixture.engine.respond(
            to: self.request("forward", "suggest", timeoutMs: 3000), from: client)
        let forwarded = try #require(await plugin.sink.nextCall())
        #expect(forwarded.timeoutMs <= 3000, "the plugin was given \(forwarded.timeoutMs) ms, of the caller's 3000")
        // The plugin never answers: the caller's deadline ends the nested call.
        let response = await answered
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.deadlineExceeded.rawValue))
    }
}

/// `forward.suggest` calls the plugin's `advisor.suggest` on its caller's behalf.
enum ForwardSchema: NamespaceSchema {
    static let name = "forward"
    static let version: UInt32 = 1
    static let suggest = MethodSchema<ForwardSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "suggest")
    static let methods: [MethodInfo] = [suggest.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

enum AdvisorCallSchema: NamespaceSchema {
    static let name = "advisor"
    static let version: UInt32 = 1
    static let suggest = MethodSchema<AdvisorCallSchema, Mentory_V1_MentorSetRequest, Mentory_V1_MentorState>(
        name: "suggest")
    static let methods: [MethodInfo] = [suggest.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

struct ForwardingHandler: MentoryHandler {
    typealias Namespace = ForwardSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.suggest) { _, call, context in
            _ = try await context.call(AdvisorCallSchema.suggest, .make("hello"), for: call)
            return Mentory_V1_Empty()
        }
    }
}
