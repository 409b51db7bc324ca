import Foundation
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import Testing

@Suite("Plugins declared by a reload")
struct PluginDeclarationTests {
    typealias Fixture = PluginTests

    @Test("a plugin refused because nothing declared it is told to register again once a reload declares it")
    func declaredLater() async throws {
        let fixture = try await Fixture.fixture(plugins: [])
        let (waiting, sink) = await Fixture.attachPlugin(fixture)
        let refused = try await fixture.send(WireNames.plugin, "register", Fixture.registration(), from: waiting)
        #expect(refused.error.code == UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue))
        #expect(refused.error.reason == MentoryError.Reason.pluginNotDeclared)
        #expect(refused.error.message.contains("reload mentoryd"), "\(refused.error.message)")
        #expect(sink.closedBecause == nil, "the connection stays open until the namespace is declared")

        let changes = await fixture.engine.declarePlugins([Fixture.declaration])
        #expect(changes.added == ["advisor"])
        #expect(changes.removed.isEmpty && changes.changed.isEmpty && changes.refused.isEmpty)
        let closed = try #require(sink.closedBecause)
        #expect(closed.code == .unavailable)
        #expect(closed.message.contains("plugin 'advisor' is declared now"), "\(closed.message)")

        // The plugin connects again (its SDK does so at once) and serves.
        await fixture.engine.detach(waiting)
        let plugin = try await Fixture.connectPlugin(fixture)
        let (client, _) = await fixture.connect()
        async let answered = Fixture.suggest(fixture, from: client)
        let call = try #require(await plugin.sink.nextCall())
        await fixture.engine.pluginReply(try Fixture.reply(call, content: "declared"), from: plugin.id)
        let response = try await answered
        #expect(try Mentory_V1_MentorState(serializedBytes: response.body).message.content == "declared")
        #expect(await fixture.engine.pluginStatuses.map(\.name) == ["advisor"])
    }

    @Test("a plugin a reload removes stops serving: its calls fail, its subscribers are told, its connection closes")
    func removed() async throws {
        let fixture = try await Fixture.fixture()
        let plugin = try await Fixture.connectPlugin(fixture)
        let (subscriber, events) = await fixture.connect()
        async let subscribed = fixture.subscribe(subscriber, to: ["advice"])
        let snapshotCall = try #require(await plugin.sink.nextCall())
        await fixture.engine.pluginReply(try Fixture.reply(snapshotCall, content: "snap"), from: plugin.id)
        _ = try await subscribed
        #expect(await events.next().first?.kind == .snapshot)

        let (client, _) = await fixture.connect()
        async let inFlight = Fixture.suggest(fixture, from: client)
        _ = try #require(await plugin.sink.nextCall())
        let changes = await fixture.engine.declarePlugins([])
        #expect(changes.removed == ["advisor"])

        let failed = try await inFlight
        #expect(failed.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
        #expect(failed.error.message.contains("no longer declared"), "\(failed.error.message)")
        let ended = try #require(await events.next().first)
        #expect(ended.kind == .ended)
        #expect(ended.topic == "advice")
        #expect(ended.error.code == UInt32(Mentory_V1_ErrorCode.notFound.rawValue))
        #expect(ended.error.message.contains("plugin 'advisor' is no longer declared"), "\(ended.error.message)")
        #expect(await fixture.engine.subscriberIDs(of: "advice").isEmpty)
        #expect(plugin.sink.closedBecause?.code == .unavailable)
        #expect(await fixture.engine.pluginStatuses.isEmpty)
        let after = try await Fixture.suggest(fixture, from: client)
        #expect(after.error.code == UInt32(Mentory_V1_ErrorCode.unknownNamespace.rawValue))
    }

    @Test("a reload that changes what a plugin requires keeps its registration and applies the requirement")
    func requirementsChanged() async throws {
        let fixture = try await Fixture.fixture()
        _ = try await Fixture.connectPlugin(fixture)
        let oracle = PluginDeclaration(name: "oracle", namespace: "oracle")
        let needsOracle = PluginDeclaration(name: "advisor", namespace: "advisor", requires: ["oracle"])
        let changes = await fixture.engine.declarePlugins([needsOracle, oracle])
        #expect(changes.changed == ["advisor"])
        #expect(changes.added == ["oracle"])
        let (client, _) = await fixture.connect()
        let response = try await Fixture.suggest(fixture, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
        #expect(response.error.message.contains("it requires 'oracle'"), "\(response.error.message)")
        #expect(await fixture.engine.pluginStatuses.map(\.name) == ["advisor", "oracle"])
        #expect(await fixture.engine.pluginStatuses.first?.state == .connected)
    }
}
