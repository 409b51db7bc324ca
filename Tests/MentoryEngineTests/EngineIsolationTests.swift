import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOPosix
import Testing

/// A namespace whose one method reports where its route ran.
enum WhereSchema: NamespaceSchema {
    static let name = "where"
    static let version: UInt32 = 1
    static let probe = MethodSchema<WhereSchema, Mentory_V1_Empty, Mentory_V1_ActionItem>(name: "probe")
    static let methods: [MethodInfo] = [probe.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// Answers `where.probe`, a route that suspends, with `before after`: `loop` for each point at which it
/// ran on an event loop's thread (the engine's executor), `off` where it did not.
struct WhereHandler: MentoryHandler {
    typealias Namespace = WhereSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.probe) { _, _, _ in
            let before = MultiThreadedEventLoopGroup.currentEventLoop == nil ? "off" : "loop"
            await Task.yield()
            let after = MultiThreadedEventLoopGroup.currentEventLoop == nil ? "off" : "loop"
            var reply = Mentory_V1_ActionItem()
            reply.text = "\(before) \(after)"
            return reply
        }
    }
}

@Suite("Where the engine runs a handler's routes")
struct EngineIsolationTests {
    @Test("a route that suspends runs on the engine's executor, before and after it suspends")
    func suspendingRouteRunsOnTheEngine() async throws {
        let fixture = try await EngineFixture()
        try await fixture.engine.register(WhereHandler())
        let (client, _) = await fixture.connect()
        let reply = try await fixture.call(
            WhereSchema.name, WhereSchema.probe.name, Mentory_V1_Empty(), from: client, as: Mentory_V1_ActionItem.self)
        // Handler state is isolated to the engine: a route run anywhere else would race with it.
        #expect(reply.text == "loop loop")
    }
}
