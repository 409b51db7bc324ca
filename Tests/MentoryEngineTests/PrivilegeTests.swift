import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore
import SwiftProtobuf
import Testing

/// Stands in for the `daemon` namespace: `reload` (PRIVILEGE_OWNER) answers at once.
private struct FakeDaemonHandler: MentoryHandler {
    typealias Namespace = MentorySchema.Daemon

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.reload) { _, _, _ in Mentory_V1_DaemonReloadReply() }
    }
}

/// Stands in for the `debug` namespace: `freezeEngine` (PRIVILEGE_ROOT) answers at once, freezing nothing.
private struct FakeDebugHandler: MentoryHandler {
    typealias Namespace = MentorySchema.Debug

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.freezeEngine) { _, _, _ in Mentory_V1_Empty() }
    }
}

/// A namespace whose one method, `relay.reload`, calls `daemon.reload` on its caller's behalf.
private enum RelaySchema: NamespaceSchema {
    static let name = "relay"
    static let version: UInt32 = 1
    static let reload = MethodSchema<RelaySchema, Mentory_V1_Empty, Mentory_V1_DaemonReloadReply>(name: "reload")
    static let methods: [MethodInfo] = [reload.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

private struct RelayHandler: MentoryHandler {
    typealias Namespace = RelaySchema
    var requires: [String] { ["daemon"] }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.reload) { _, call, context in
            try await context.call(MentorySchema.Daemon.reload, Mentory_V1_DaemonReloadRequest(), for: call)
        }
    }
}

@Suite("Privileged methods: (mentory.v1.privilege) is a floor access.rules cannot lower")
struct PrivilegeTests {
    static let daemonUID: UInt32 = 1000
    static let daemonUser = PeerCredentials(pid: 10, uid: 1000, gid: 1000)
    static let stranger = PeerCredentials(pid: 11, uid: 1001, gid: 1001)
    static let root = PeerCredentials(pid: 1, uid: 0, gid: 0)
    static let allowAll = AccessPolicy(rules: [AccessPolicy.Rule(allows: true, principal: .any, actions: ["*"])])
    static let denied = UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue)

    @Test("the generated schema carries each method's privilege, and session.describe sends it")
    func generatedMethodInfo() throws {
        #expect(MentorySchema.Daemon.reload.privilege == .owner)
        #expect(try #require(MentorySchema.Daemon.info.method(named: "reload")).privilege == .owner)
        #expect(MentorySchema.Storage.backup.info.privilege == .owner)
        #expect(MentorySchema.Storage.backupRead.info.privilege == .owner)
        #expect(MentorySchema.Debug.freezeEngine.info.privilege == .root)
        #expect(MentorySchema.Diary.add.info.privilege == .unspecified, "undeclared: the rules decide")
        #expect(MentorySchema.Plugin.register.info.privilege == .owner)
        #expect(MentorySchema.Session.monitor.info.privilege == .owner)
        #expect(MentorySchema.Session.subscribe.info.privilege == .unspecified)
        let wire = MentorySchema.Daemon.info.wireDescription
        #expect(wire.methods.first { $0.name == "reload" }?.privilege == .owner)
    }

    @Test(
        "who holds which privilege",
        arguments: [
            // (privilege, uid or nil for unknown credentials, permitted)
            (Mentory_V1_Privilege.unspecified, UInt32?.none, true), (.unspecified, 1001, true),
            (.owner, 0, true), (.owner, 1000, true), (.owner, 1001, false), (.owner, nil, false),
            (.root, 0, true), (.root, 1000, false), (.root, 1001, false), (.root, nil, false),
            (.UNRECOGNIZED(7), 0, true), (.UNRECOGNIZED(7), 1000, false),
        ]
    )
    func permits(privilege: Mentory_V1_Privilege, uid: UInt32?, permitted: Bool) {
        let credentials = uid.map { PeerCredentials(pid: 5, uid: $0, gid: $0) }
        #expect(AccessPolicy.permits(privilege, credentials: credentials, daemonUID: Self.daemonUID) == permitted)
    }

    @Test("without a daemon uid, PRIVILEGE_OWNER is root's alone")
    func ownerWithoutDaemonUID() {
        #expect(AccessPolicy.permits(.owner, credentials: Self.root, daemonUID: nil))
        #expect(!AccessPolicy.permits(.owner, credentials: Self.daemonUser, daemonUID: nil))
    }

    private func fixture() async throws -> EngineFixture {
        let fixture = try await EngineFixture(accessPolicy: Self.allowAll, daemonUID: Self.daemonUID)
        try await fixture.engine.register(FakeDaemonHandler())
        try await fixture.engine.register(FakeDebugHandler())
        try await fixture.engine.register(RelayHandler())
        return fixture
    }

    /// The outcome of `namespace.method` from `connection`, twice through the engine's one pipeline: first as a
    /// generated message, when the method's route is made, then as the server calls it, when the connection
    /// finds the route in its cache.
    private func codes(
        _ fixture: EngineFixture, _ namespace: String, _ method: String, _ body: some SwiftProtobuf.Message,
        from connection: ConnectionID
    ) async throws -> (byName: UInt32, routed: UInt32?) {
        let byName = try await fixture.send(namespace, method, body, from: connection).error.code
        let request = InboundRequest(
            id: 2, namespace: namespace, method: method, body: ByteBuffer(bytes: try body.serializedData()))
        let routed: UInt32
        switch await fixture.engine.respond(to: request, from: connection, received: .now) {
        case .answered(let response): routed = response.code
        case .suspended(let task, _): routed = await task.value.code
        }
        return (byName, routed)
    }

    @Test(
        "with allow any *, an OWNER method is for root and the daemon's user and a ROOT method for root alone",
        arguments: [
            // (uid or nil for unknown credentials, may reload, may freeze)
            (UInt32?.none, false, false), (1001, false, false), (1000, true, false), (0, true, true),
        ]
    )
    func engineEnforces(uid: UInt32?, mayReload: Bool, mayFreeze: Bool) async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect(credentials: uid.map { PeerCredentials(pid: 5, uid: $0, gid: $0) })
        let reload = try await self.codes(
            fixture, "daemon", "reload", Mentory_V1_DaemonReloadRequest(), from: client)
        #expect(reload.byName == (mayReload ? 0 : Self.denied))
        #expect(reload.routed == (mayReload ? 0 : Self.denied))
        var seconds = Google_Protobuf_UInt32Value()
        seconds.value = 1
        let freeze = try await self.codes(fixture, "debug", "freezeEngine", seconds, from: client)
        #expect(freeze.byName == (mayFreeze ? 0 : Self.denied))
        #expect(freeze.routed == (mayFreeze ? 0 : Self.denied))
        // The rules still decide what no privilege covers.
        #expect(try await self.codes(fixture, "session", "ping", Mentory_V1_Empty(), from: client).byName == 0)
    }

    @Test("the error of a privilege refusal is the one access.rules gives, naming the method")
    func refusalError() async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect(credentials: Self.stranger)
        let response = try await fixture.send("daemon", "reload", Mentory_V1_DaemonReloadRequest(), from: client)
        let expected = MentoryError.permissionDenied(namespace: "daemon", method: "reload").wireError
        #expect(response.error.code == expected.code)
        #expect(response.error.message == expected.message)
    }

    @Test("a handler calling a privileged method on its caller's behalf gets it only for a caller who holds it")
    func onBehalf() async throws {
        let fixture = try await self.fixture()
        let (stranger, _) = await fixture.connect(credentials: Self.stranger)
        let refused = try await fixture.send("relay", "reload", Mentory_V1_Empty(), from: stranger)
        #expect(refused.error.code == Self.denied)
        #expect(refused.error.message.contains("daemon.reload"), "\(refused.error.message)")
        let (owner, _) = await fixture.connect(credentials: Self.daemonUser)
        _ = try await fixture.call(
            "relay", "reload", Mentory_V1_Empty(), from: owner, as: Mentory_V1_DaemonReloadReply.self)
    }

    /// A registration of namespace `advisor` whose descriptors declare `suggest` with `privilege`.
    static func registration(declaring privilege: Mentory_V1_Privilege) throws -> Mentory_V1_PluginRegisterRequest {
        var request = PluginTests.registration()
        var file = Google_Protobuf_FileDescriptorProto()
        file.name = "advisor_privilege_test.proto"
        file.package = "advisortest.v1"
        file.dependency = ["mentory.proto"]
        file.syntax = "proto3"
        var service = Google_Protobuf_ServiceDescriptorProto()
        service.name = "Advisor"
        service.options.Mentory_V1_namespace = "advisor"
        var method = Google_Protobuf_MethodDescriptorProto()
        method.name = "suggest"
        method.inputType = ".mentory.v1.MentorSetRequest"
        method.outputType = ".mentory.v1.MentorState"
        method.options.Mentory_V1_privilege = privilege
        service.method = [method]
        file.service = [service]
        // As a plugin sends it: serialized, so the daemon reads the options as it gets them.
        let encoded = try Google_Protobuf_FileDescriptorProto(serializedBytes: try file.serializedData())
        request.descriptors.file = [encoded]
        return request
    }

    @Test("a plugin's method declared with (privilege) in its registration's descriptors is refused to others")
    func pluginMethod() async throws {
        let fixture = try await PluginTests.fixture(accessPolicy: Self.allowAll)
        let (pluginID, sink) = await PluginTests.attachPlugin(fixture)
        _ = try await fixture.call(
            WireNames.plugin, "register", try Self.registration(declaring: .root), from: pluginID,
            as: Mentory_V1_PluginRegisterReply.self)
        let (stranger, _) = await fixture.connect(credentials: Self.stranger)
        let refused = try await PluginTests.suggest(fixture, from: stranger)
        #expect(refused.error.code == Self.denied, "refused before it reaches the plugin")
        // Described as privileged.
        let described = try await fixture.call(
            WireNames.session, "describe", Mentory_V1_DescribeRequest.with { $0.namespace = "advisor" },
            from: stranger, as: Mentory_V1_DescribeReply.self)
        #expect(described.namespaces.first?.methods.first?.privilege == .root)
        // Root's call is forwarded.
        let (root, _) = await fixture.connect(credentials: Self.root)
        async let answer = PluginTests.suggest(fixture, from: root, timeoutMs: 60_000)
        let call = try #require(await sink.nextCall())
        #expect(call.caller.uid == 0)
        await fixture.engine.pluginReply(try PluginTests.reply(call, content: "ok"), from: pluginID)
        #expect(try await answer.error.code == 0)
    }

    @Test("a plugin's privilege is the stricter of its method description's and its descriptors'")
    func pluginStricter() async throws {
        let fixture = try await PluginTests.fixture(accessPolicy: Self.allowAll)
        let (pluginID, _) = await PluginTests.attachPlugin(fixture)
        var request = try Self.registration(declaring: .unspecified)
        request.methods[0].privilege = .owner
        _ = try await fixture.call(
            WireNames.plugin, "register", request, from: pluginID, as: Mentory_V1_PluginRegisterReply.self)
        let (stranger, _) = await fixture.connect(credentials: Self.stranger)
        #expect(try await PluginTests.suggest(fixture, from: stranger).error.code == Self.denied)
    }
}
