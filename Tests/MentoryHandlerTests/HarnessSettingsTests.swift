import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryWire
import NIOConcurrencyHelpers
import SwiftProtobuf
import Testing

/// `limits.frame` answers the frame limit the handler sees.
private enum LimitsSchema: NamespaceSchema {
    static let name = "limits"
    static let version: UInt32 = 1
    static let frame = MethodSchema<LimitsSchema, Mentory_V1_Empty, Google_Protobuf_Int64Value>(name: "frame")
    static let methods: [MethodInfo] = [frame.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentorySchema.fileDescriptors }
}

/// What `close` was handed: the count of calls in the state.
private final class ClosedWith: Sendable {
    let calls = NIOLockedValueBox<Int?>(nil)
}

/// Counts its calls in its state; `close` reports the count it was handed.
private struct LimitsHandler: MentoryHandler {
    typealias Namespace = LimitsSchema
    let closedWith: ClosedWith

    final class State {
        var calls = 0
    }

    func open(_ setup: HandlerSetup) async throws -> sending State { State() }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.frame) { _, _, context in
            context.state.calls += 1
            return Google_Protobuf_Int64Value(Int64(context.settings.maxFrameLength))
        }
    }

    func close(_ state: consuming State, setup: HandlerSetup) async {
        let calls = state.calls
        self.closedWith.calls.withLockedValue { $0 = calls }
    }
}

@Suite("The test harness: the daemon's settings and the state close gets")
struct HarnessSettingsTests {
    @Test("a handler reads the settings given to the harness, a reload replaces them, close gets the state")
    func settingsAndClose() async throws {
        let handler = LimitsHandler(closedWith: ClosedWith())
        let harness = try await HandlerTestHarness.open(
            handler, settings: GlobalSettings(maxFrameLength: 300_000))
        #expect(try await harness.call(LimitsSchema.frame, Mentory_V1_Empty()).value == 300_000)
        try await harness.reload(config: [:], settings: GlobalSettings(maxFrameLength: 400_000))
        #expect(try await harness.call(LimitsSchema.frame, Mentory_V1_Empty()).value == 400_000)
        await harness.close()
        #expect(handler.closedWith.calls.withLockedValue { $0 } == 2)
    }
}
