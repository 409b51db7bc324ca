import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryWire
import SwiftProtobuf
import Testing

/// ``VaultSchema`` answered with replies serialized once: the change a route published, or a reply it keeps.
struct SerializedVaultHandler: MentoryHandler {
    typealias Namespace = VaultSchema

    /// A reply made once and sent to every `wipe`.
    final class State {
        let wiped = Serialized(Mentory_V1_Empty())
        var opened = 0
    }

    func open(_ setup: HandlerSetup) async throws -> sending State { State() }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.open) { _, _, context in
            context.state.opened += 1
            return context.publish(Google_Protobuf_StringValue("opened \(context.state.opened)"), on: Namespace.opened)
        }
        routes.onAsync(Namespace.wipe) { _, _, context in context.state.wiped }
        routes.onAsync(
            Namespace.fail,
            attempt: { _, _, context in context.state.opened > 1 ? context.state.wiped : nil }
        ) { _, _, context in
            context.state.wiped
        }
        routes.snapshot(Namespace.opened) { _ in Google_Protobuf_StringValue("closed") }
    }
}

@Suite("Serialized replies: a change published and answered with, serialized once")
struct SerializedReplyTests {
    @Test("a route answering with what it published sends the change it published, and both decode to it")
    func publishedReply() async throws {
        let harness = try await HandlerTestHarness.open(SerializedVaultHandler())
        #expect(try await harness.call(VaultSchema.open, Mentory_V1_Empty()).value == "opened 1")
        #expect(try await harness.call(VaultSchema.open, Mentory_V1_Empty()).value == "opened 2")
        #expect(try await harness.published(on: VaultSchema.opened).map(\.value) == ["opened 1", "opened 2"])
        #expect(try await harness.answersImmediately(VaultSchema.open, Mentory_V1_Empty()))
        await harness.close()
    }

    @Test("a reply kept and sent again, by a route that suspends and by an attempt, is the same every time")
    func keptReply() async throws {
        let harness = try await HandlerTestHarness.open(SerializedVaultHandler())
        for _ in 0..<3 {
            #expect(try await harness.call(VaultSchema.wipe, Mentory_V1_Empty()) == Mentory_V1_Empty())
        }
        // The attempt steps aside until the vault was opened twice, then answers.
        #expect(try await harness.call(VaultSchema.fail, Mentory_V1_Empty()) == Mentory_V1_Empty())
        _ = try await harness.call(VaultSchema.open, Mentory_V1_Empty())
        _ = try await harness.call(VaultSchema.open, Mentory_V1_Empty())
        #expect(try await harness.call(VaultSchema.fail, Mentory_V1_Empty()) == Mentory_V1_Empty())
        await harness.close()
    }

    @Test("a message serialized decodes to itself")
    func roundTrip() throws {
        let message = Google_Protobuf_StringValue("once")
        #expect(try Serialized(message).decoded() == message)
        #expect(try Serialized(Mentory_V1_Empty()).decoded() == Mentory_V1_Empty())
    }
}
