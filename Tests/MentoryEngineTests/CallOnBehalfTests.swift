import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import SwiftProtobuf
import Testing

/// A namespace for these tests: `moods.entries` lists the diary through `diary.list`, on its caller's
/// behalf; `moods.loop` calls `loop.back`, which calls `moods.loop` again.
enum MoodsSchema: NamespaceSchema {
    static let name = "moods"
    static let version: UInt32 = 1
    static let entries = MethodSchema<MoodsSchema, Mentory_V1_Empty, Mentory_V1_DiaryListReply>(name: "entries")
    static let loop = MethodSchema<MoodsSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "loop")
    static let methods: [MethodInfo] = [entries.info, loop.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

enum LoopSchema: NamespaceSchema {
    static let name = "loop"
    static let version: UInt32 = 1
    static let back = MethodSchema<LoopSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "back")
    static let methods: [MethodInfo] = [back.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

struct MoodsHandler: MentoryHandler {
    typealias Namespace = MoodsSchema
    var requires: [String] { ["diary", "loop"] }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.entries) { _, call, context in
            try await context.call(MentorySchema.Diary.list, Mentory_V1_DiaryListRequest(), for: call)
        }
        routes.onAsync(Namespace.loop) { _, call, context in
            try await context.call(LoopSchema.back, Mentory_V1_Empty(), for: call)
        }
    }
}

struct LoopHandler: MentoryHandler {
    typealias Namespace = LoopSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.back) { _, call, context in
            try await context.call(MoodsSchema.loop, Mentory_V1_Empty(), for: call)
        }
    }
}

@Suite("Calls a handler makes on its caller's behalf")
struct CallOnBehalfTests {
    static let denied = PeerCredentials(pid: 1, uid: 1000, gid: 1000)
    static let allowed = PeerCredentials(pid: 2, uid: 1001, gid: 1001)

    private func fixture() async throws -> EngineFixture {
        let policy = AccessPolicy(
            rules: [try AccessPolicy.Rule(parsing: "deny uid=1000 diary.*")] + AccessPolicy.default.rules)
        let fixture = try await EngineFixture(accessPolicy: policy)
        try await fixture.engine.register(MoodsHandler())
        try await fixture.engine.register(LoopHandler())
        return fixture
    }

    @Test("a caller denied diary.* but allowed moods.* gets PERMISSION_DENIED when moods calls diary.list for it")
    func deniedThroughAHandler() async throws {
        let fixture = try await self.fixture()
        let (stranger, _) = await fixture.connect(credentials: Self.denied)
        let response = try await fixture.send("moods", "entries", Mentory_V1_Empty(), from: stranger)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue))
        #expect(response.error.message.contains("diary.list"), "\(response.error.message)")
        // Calling diary directly is refused the same way.
        #expect(
            try await fixture.failure("diary", "list", Mentory_V1_DiaryListRequest(), from: stranger)
                == .permissionDenied)

        var entry = Mentory_V1_DiaryAddRequest()
        entry.title = "t"
        entry.text = "a day"
        entry.emotion = .pleasant
        entry.recordDate = "2026-01-02"
        let (friend, _) = await fixture.connect(credentials: Self.allowed)
        _ = try await fixture.call("diary", "add", entry, from: friend, as: Mentory_V1_DiaryEntry.self)
        let listed = try await fixture.call(
            "moods", "entries", Mentory_V1_Empty(), from: friend, as: Mentory_V1_DiaryListReply.self)
        #expect(listed.entries.map(\.text) == ["a day"])
    }

    @Test("a call back into a namespace already on the way is refused with INTERNAL, naming the chain")
    func cycleRefused() async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect(credentials: Self.allowed)
        let response = try await fixture.send("moods", "loop", Mentory_V1_Empty(), from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.internal.rawValue))
        #expect(response.error.message.contains("moods -> loop -> moods"), "\(response.error.message)")
    }
}

/// A namespace whose one method calls an engine namespace (`session.status`, or `plugin.publish`) on its
/// caller's behalf, which the gate refuses: those act on the connection calling them.
enum IntruderSchema: NamespaceSchema {
    static let name = "intruder"
    static let version: UInt32 = 1
    static let status = MethodSchema<IntruderSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "status")
    static let publish = MethodSchema<IntruderSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "publish")
    static let methods: [MethodInfo] = [status.info, publish.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

struct IntruderHandler: MentoryHandler {
    typealias Namespace = IntruderSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.status) { _, call, context in
            _ = try await context.call(MentorySchema.Session.status, Mentory_V1_Empty(), for: call)
            return Mentory_V1_Empty()
        }
        routes.onAsync(Namespace.publish) { _, call, context in
            _ = try await context.call(MentorySchema.Plugin.publish, Mentory_V1_PluginPublishRequest(), for: call)
            return Mentory_V1_Empty()
        }
    }
}

@Suite("The engine's own namespaces, hosted like any handler; plugins, kept once")
struct EngineNamespaceCallTests {
    @Test(
        "a handler's call into session or plugin on its caller's behalf is refused, though root may call them",
        arguments: ["status", "publish"])
    func refused(method: String) async throws {
        let fixture = try await EngineFixture()
        try await fixture.engine.register(IntruderHandler())
        let (root, _) = await fixture.connect(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0))
        let response = try await fixture.send("intruder", method, Mentory_V1_Empty(), from: root)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.internal.rawValue))
        #expect(
            response.error.message.contains("only handler and plugin namespaces can be called on a caller's behalf"),
            "\(response.error.message)")
        // Called directly, session.status answers as ever.
        _ = try await fixture.call("session", "status", Mentory_V1_Empty(), from: root, as: Mentory_V1_StatusReply.self)
    }

    @Test("session, plugin, a handler and a plugin are each kept in one place, the plugin in the plugin host")
    func hostedOnce() async throws {
        let fixture = try await EngineFixture()
        try await fixture.engine.declarePlugin(PluginDeclaration(name: "advisor", namespace: "advisor"))
        let (root, _) = await fixture.connect(credentials: PeerCredentials(pid: 1, uid: 0, gid: 0))
        _ = try await fixture.call("session", "ping", Mentory_V1_Empty(), from: root, as: Mentory_V1_Empty.self)
        for namespace in ["session", "plugin", "diary", "advisor"] {
            #expect(await fixture.engine.isHostedOnce(namespace), "\(namespace)")
        }
    }
}

/// A handler whose configuration is refused when it opens.
struct MisconfiguredHandler: MentoryHandler {
    typealias Namespace = LoopSchema

    func open(_ setup: HandlerSetup) async throws -> sending Void {
        throw HandlerConfigurationError(key: "depth", message: "must be at least 1, not 0")
    }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.back) { request, _, _ in request }
    }
}

@Suite("A handler's configuration error")
struct HandlerConfigurationErrorTests {
    @Test("thrown from open, it fails the registration with INVALID_ARGUMENT naming the key (start-up exits 78)")
    func fromOpen() async throws {
        let fixture = try await EngineFixture()
        do {
            try await fixture.engine.register(MisconfiguredHandler())
            Issue.record("a misconfigured handler was registered")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message == "handlers.loop.depth: must be at least 1, not 0")
        }
    }
}

@Suite("Plugins calling on their callers' behalf (plugin.call)")
struct PluginCallOnBehalfTests {
    /// The plugin, asked `advisor.suggest` by a client with `credentials`, calls `diary.list` for it.
    static func diaryThroughPlugin(as credentials: PeerCredentials) async throws -> Mentory_V1_Response {
        let policy = AccessPolicy(
            rules: [try AccessPolicy.Rule(parsing: "deny uid=1000 diary.*")] + AccessPolicy.default.rules)
        let fixture = try await PluginTests.fixture(accessPolicy: policy)
        let plugin = try await PluginTests.connectPlugin(fixture)
        let (client, _) = await fixture.connect(credentials: credentials)
        async let suggested = PluginTests.suggest(fixture, from: client)
        let forwarded = try #require(await plugin.sink.nextCall())
        var request = Mentory_V1_PluginCallRequest()
        request.callID = forwarded.callID
        request.namespace = "diary"
        request.method = "list"
        request.body = try Mentory_V1_DiaryListRequest().serializedData()
        let response = try await fixture.send(WireNames.plugin, "call", request, from: plugin.id, id: 2)
        await fixture.engine.pluginReply(try PluginTests.reply(forwarded, content: "done"), from: plugin.id)
        _ = try await suggested
        return response
    }

    @Test("a caller denied diary.* gets PERMISSION_DENIED when a plugin calls diary.list for it; others get the list")
    func denied() async throws {
        let refused = try await Self.diaryThroughPlugin(as: CallOnBehalfTests.denied)
        #expect(refused.error.code == UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue))
        let allowed = try await Self.diaryThroughPlugin(as: CallOnBehalfTests.allowed)
        guard case .body(let body) = allowed.result else {
            Issue.record("plugin.call failed: \(allowed.error.message)")
            return
        }
        let reply = try Mentory_V1_PluginCallReply(serializedBytes: body)
        #expect(try Mentory_V1_DiaryListReply(serializedBytes: reply.body).entries.isEmpty)
    }

    @Test("plugin.call for a call that is not in flight is INVALID_ARGUMENT")
    func notInFlight() async throws {
        let fixture = try await PluginTests.fixture()
        let plugin = try await PluginTests.connectPlugin(fixture)
        var request = Mentory_V1_PluginCallRequest()
        request.callID = 99
        request.namespace = "diary"
        request.method = "list"
        #expect(try await fixture.failure(WireNames.plugin, "call", request, from: plugin.id) == .invalidArgument)
    }
}
