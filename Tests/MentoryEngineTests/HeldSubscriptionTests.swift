import Foundation
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryTestSupport
import MentoryWire
import SwiftProtobuf
import Testing

@Suite("Subscriptions to an absent plugin's topics")
struct HeldSubscriptionTests {
    /// The reset's snapshot call is answered by the test itself: a deadline far beyond what a loaded
    /// machine under ThreadSanitizer needs, so that a slow answer is never a timed-out reset.
    static let callTimeout = Duration.seconds(600)

    /// A temporary state directory, removed by `body`'s end.
    static func withDirectory(_ body: (String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("mentory-held-\(UInt64.random(in: 0...UInt64.max))").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(directory)
    }

    @Test("the last registration is kept across engines: held while absent, a RESET when it registers")
    func acrossRestart() async throws {
        try await Self.withDirectory { directory in
            let files = PluginRegistrationFiles(directory: directory + "/plugins")
            let first = try await EngineFixture(pluginCallTimeout: Self.callTimeout, pluginRegistrations: files)
            try await first.engine.declarePlugin(PluginTests.declaration)
            let plugin = try await PluginTests.connectPlugin(first, expectedCallTimeoutMs: 600_000)
            await first.engine.detach(plugin.id)
            // Written off the engine's executor: wait (bounded) for the file.
            let path = directory + "/plugins/advisor.registration"
            _ = await eventually(timeout: .seconds(30)) { FileManager.default.fileExists(atPath: path) }
            #expect(FileManager.default.fileExists(atPath: path))

            // A new engine (a daemon restart): the namespace is known before the plugin returns.
            let second = try await EngineFixture(pluginCallTimeout: Self.callTimeout, pluginRegistrations: files)
            try await second.engine.declarePlugin(PluginTests.declaration)
            #expect(await second.engine.topicNames.contains("advice"))
            let (subscriber, events) = await second.connect()
            let reply = try await second.subscribe(subscriber, to: ["advice"], resumeAfter: 3, epoch: 1)
            #expect(reply.topics.map(\.topic) == ["advice"])
            let (client, _) = await second.connect()
            let call = try await PluginTests.suggest(second, from: client)
            #expect(call.error.code == UInt32(Mentory_V1_ErrorCode.unavailable.rawValue))
            #expect(call.error.message.contains("plugin 'advisor' is not connected"), "\(call.error.message)")

            let returned = try await PluginTests.connectPlugin(second, expectedCallTimeoutMs: 600_000)
            let resetCall = try #require(await returned.sink.nextCall())
            #expect(resetCall.snapshotTopic == "advice")
            await second.engine.pluginReply(try PluginTests.reply(resetCall, content: "back"), from: returned.id)
            let reset = try #require(await events.next().first)
            #expect(reset.kind == .reset)
            #expect(try Mentory_V1_MentorState(serializedBytes: reset.body).message.content == "back")
            // Both engines write registrations off their executors: wait for the last writes (as shut-down
            // does), so that none lands after the directory is removed.
            await first.engine.closeHandlers()
            await second.engine.closeHandlers()
        }
    }

    @Test("a new subscription while the plugin is away is held, not refused; it gets a RESET on registration")
    func newSubscriptionHeld() async throws {
        let fixture = try await PluginTests.fixture(pluginCallTimeout: Self.callTimeout)
        let plugin = try await PluginTests.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        await fixture.engine.detach(plugin.id)
        let (subscriber, events) = await fixture.connect()
        _ = try await fixture.subscribe(subscriber, to: ["advice", "mentor"])
        // Only the built-in topic's snapshot comes now.
        let snapshot = try #require(await events.next().first)
        #expect(snapshot.topic == "mentor" && snapshot.kind == .snapshot)
        let returned = try await PluginTests.connectPlugin(fixture, expectedCallTimeoutMs: 600_000)
        let resetCall = try #require(await returned.sink.nextCall())
        await fixture.engine.pluginReply(try PluginTests.reply(resetCall, content: "now"), from: returned.id)
        let reset = try #require(await events.next().first)
        #expect(reset.topic == "advice" && reset.kind == .reset)
    }
}
