import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import SwiftProtobuf
import Synchronization
import Testing

/// `hold.release` waits until the test releases it; `hold.forever` waits until its task is cancelled.
enum HoldSchema: NamespaceSchema {
    static let name = "hold"
    static let version: UInt32 = 1
    static let release = MethodSchema<HoldSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "release")
    static let forever = MethodSchema<HoldSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "forever")
    static let methods: [MethodInfo] = [release.info, forever.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// Where a test lets `hold.release` go on, and sees that a held call started.
final class Holds: Sendable {
    let started: AsyncStream<Void>
    private let startedContinuation: AsyncStream<Void>.Continuation
    private let released: AsyncStream<Void>
    private let releasedContinuation: AsyncStream<Void>.Continuation
    let cancelled = Atomic<Int>(0)

    init() {
        (self.started, self.startedContinuation) = AsyncStream.makeStream(of: Void.self)
        (self.released, self.releasedContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    func start() { self.startedContinuation.yield() }
    func release() { self.releasedContinuation.finish() }
    func waitForRelease() async { for await _ in self.released {} }
}

struct HoldHandler: MentoryHandler {
    typealias Namespace = HoldSchema
    let holds: Holds

    func routes(_ routes: inout HandlerRoutes<Self>) {
        let holds = self.holds
        routes.onAsync(Namespace.release) { _, _, _ in
            holds.start()
            await holds.waitForRelease()
            return Mentory_V1_Empty()
        }
        routes.onAsync(Namespace.forever) { _, _, _ in
            holds.start()
            // Ends only when the request's task is cancelled.
            while (try? await Task.sleep(for: .seconds(3600))) != nil {}
            holds.cancelled.add(1, ordering: .relaxed)
            return Mentory_V1_Empty()
        }
    }
}

@Suite("The engine's tasks: requests that suspend are waited for on shut-down", .timeLimit(.minutes(2)))
struct EngineTasksTests {
    private static func request(_ method: String) -> InboundRequest {
        var request = Mentory_V1_Request()
        request.id = 1
        request.namespace = HoldSchema.name
        request.method = method
        return InboundRequest(request)
    }

    /// Starts `hold.<method>` on a new engine and returns once its handler runs.
    private static func held(
        _ method: String, _ holds: Holds
    ) async throws -> (EngineFixture, Task<OutboundResponse, Never>) {
        let fixture = try await EngineFixture()
        try await fixture.engine.register(HoldHandler(holds: holds))
        let (client, _) = await fixture.connect()
        let outcome = await fixture.engine.respond(to: Self.request(method), from: client, received: .now)
        guard case .suspended(let task, _) = outcome else {
            throw HeldCallError(message: "hold.\(method) did not suspend: \(outcome)")
        }
        for await _ in holds.started { break }
        return (fixture, task)
    }

    private struct HeldCallError: Error { var message: String }

    @Test("finishTasks waits for a request still running, which then answers")
    func waitsForRequests() async throws {
        let holds = Holds()
        let (fixture, task) = try await Self.held("release", holds)
        async let left = fixture.engine.finishTasks(within: .seconds(600))
        holds.release()
        #expect(await left == 0, "every task ended before the deadline")
        #expect(await task.value.wireResponse.error.code == 0)
        #expect(await fixture.engine.finishTasks(within: .seconds(600)) == 0, "none runs: it returns at once")
    }

    @Test("a request that outlives the deadline is cancelled, and waited for")
    func cancelsStragglers() async throws {
        let holds = Holds()
        let (fixture, task) = try await Self.held("forever", holds)
        // The first wait runs out (nothing releases the call); its cancellation ends it within the second.
        #expect(await fixture.engine.finishTasks(within: .milliseconds(50)) == 0)
        #expect(holds.cancelled.load(ordering: .relaxed) == 1)
        _ = await task.value
    }
}
