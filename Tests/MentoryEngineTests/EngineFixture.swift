import Foundation
import MentoryDiary
import MentoryEngine
import MentoryEventLoop
import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryMentor
import MentoryReachability
import MentoryStorage
import MentoryWire
import NIOCore
import NIOPosix
import SwiftProtobuf
import Synchronization
import Testing

/// A clock that always says the same time.
struct FixedClock: SessionClock {
    let date = Date(timeIntervalSince1970: 1_795_300_000)
    func now() -> Date { self.date }
}

/// The event loops the engine tests' engines run on: their own, apart from NIO's singleton group, which the
/// end-to-end tests in the same process load with thousands of client connections (under ThreadSanitizer an
/// engine queued behind them once waited past a 30 s deadline). Never shut down: they live as long as the
/// test process.
enum EngineTestLoops {
    static let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
}

/// The event loops an engine runs on in the tests that take one: NIO's, as the daemon's does today, and mentoryd's
/// own epoll loop (MentoryEventLoop), which its connections are to move onto (docs/BENCHMARKS.md, issue 32).
enum EngineTestLoop: String, CaseIterable, Sendable {
    case nio
    case epoll

    /// Runs `body` with a loop of this kind: one of ``EngineTestLoops``, or a new epoll loop shut down after it.
    func with<Result>(_ body: (any EventLoop) async throws -> Result) async throws -> Result {
        switch self {
        case .nio:
            return try await body(EngineTestLoops.group.next())
        case .epoll:
            return try await EpollEventLoop.withEventLoop(threadName: "engine-test") { try await body($0) }
        }
    }
}

/// An in-memory subscriber: records what it is sent and can pretend its queue is full.
final class RecordingSink: EventSink {
    let accepting = Atomic<Bool>(true)
    let stream: AsyncStream<Mentory_V1_Event>
    private let continuation: AsyncStream<Mentory_V1_Event>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(of: Mentory_V1_Event.self)
    }

    /// Responses of suspended requests are read from their task (`MentoryEngine.respond(to:from:)`).
    func answer(_ response: consuming OutboundResponse) {}

    func deliver(_ event: SharedEvent) -> Bool {
        guard self.accepting.load(ordering: .relaxed) else { return false }
        self.continuation.yield(event.event)
        return true
    }

    /// The next `count` events, failing the test (and returning those that came) if they do not all come
    /// within `timeout`: a deadline for a loaded machine, never a timing assertion, so that a missing
    /// event fails its test instead of hanging the suite.
    func next(_ count: Int = 1, timeout: Duration = .seconds(120)) async -> [Mentory_V1_Event] {
        let stream = self.stream
        let events = await withTaskGroup(of: [Mentory_V1_Event]?.self) { group in
            group.addTask {
                var events: [Mentory_V1_Event] = []
                for await event in stream {
                    events.append(event)
                    if events.count == count { break }
                }
                return events
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            if let first { return first }
            // The timer came first: the reader, cancelled, returns what it had.
            let partial = await group.next()
            return (partial ?? nil) ?? []
        }
        if events.count < count {
            Issue.record("\(events.count) of \(count) events came within \(timeout)")
        }
        return events
    }
}

/// An engine with the three shipped handlers over an in-memory store, and no sockets.
final class EngineFixture: Sendable {
    let engine: MentoryEngine
    let store: InMemorySessionStore
    private let nextID = Atomic<UInt64>(0)

    /// `daemonUID` is the uid the engine trusts like root; nil (the default here) trusts only root,
    /// so tests do not depend on the uid they run as. `onEventLoop` builds the engine as the daemon does, on
    /// an event loop (whose scheduled tasks keep the plugin calls' deadlines) rather than only its executor.
    init(
        ringCapacity: Int = 16,
        accessPolicy: AccessPolicy = .default,
        daemonUID: UInt32? = nil,
        pluginCallTimeout: Duration = .seconds(5),
        pluginRegistrations: PluginRegistrationFiles? = nil,
        instance: Mentory_V1_DaemonInstance = .init(),
        requestTimeout: Duration = .seconds(30),
        onEventLoop: Bool = false
    ) async throws {
        self.store = InMemorySessionStore()
        let configuration = MentoryEngine.Configuration(
            serverVersion: "test", eventRingCapacity: ringCapacity, accessPolicy: accessPolicy,
            daemonUID: daemonUID, requestTimeout: requestTimeout, pluginCallTimeout: pluginCallTimeout,
            pluginRegistrations: pluginRegistrations, instance: instance)
        let loop = EngineTestLoops.group.next()
        self.engine =
            onEventLoop
            ? MentoryEngine(configuration: configuration, eventLoop: loop, clock: FixedClock())
            : MentoryEngine(configuration: configuration, executor: loop.executor, clock: FixedClock())
        self.engine.jobs.runForTesting()
        try await self.engine.register(MentorHandler(store: self.store))
        try await self.engine.register(ReachabilityHandler())
        try await self.engine.register(DiaryHandler(store: self.store))
    }

    deinit {
        self.engine.jobs.stop()
    }

    /// A connection that completed its handshake.
    func connect(name: String = "test", credentials: PeerCredentials? = nil) async -> (ConnectionID, RecordingSink) {
        let id = ConnectionID(self.nextID.add(1, ordering: .relaxed).newValue)
        let sink = RecordingSink()
        _ = await self.engine.attach(ConnectionContext(id: id, clientName: name, credentials: credentials), sink: sink)
        return (id, sink)
    }

    /// Sends a request and returns the raw response.
    func send(
        _ namespace: String,
        _ method: String,
        _ body: some SwiftProtobuf.Message,
        from connection: ConnectionID,
        id: UInt64 = 1
    ) async throws -> Mentory_V1_Response {
        var request = Mentory_V1_Request()
        request.id = id
        request.namespace = namespace
        request.method = method
        request.body = try body.serializedData()
        let response = await self.engine.respond(to: request, from: connection)
        #expect(response.id == id)
        return response
    }

    /// Sends a request that must succeed and decodes its reply.
    func call<Reply: SwiftProtobuf.Message>(
        _ namespace: String,
        _ method: String,
        _ body: some SwiftProtobuf.Message,
        from connection: ConnectionID,
        as: Reply.Type = Reply.self
    ) async throws -> Reply {
        let response = try await self.send(namespace, method, body, from: connection)
        guard case .body(let data) = response.result else {
            Issue.record("\(namespace).\(method) failed: \(response.error.message)")
            throw CancellationError()
        }
        return try Reply(serializedBytes: data)
    }

    /// Sends a request that must fail and returns its error code.
    func failure(
        _ namespace: String,
        _ method: String,
        _ body: some SwiftProtobuf.Message,
        from connection: ConnectionID
    ) async throws -> Mentory_V1_ErrorCode? {
        let response = try await self.send(namespace, method, body, from: connection)
        guard case .error(let error) = response.result else {
            Issue.record("\(namespace).\(method) unexpectedly succeeded")
            return nil
        }
        #expect(!error.message.isEmpty)
        return Mentory_V1_ErrorCode(rawValue: Int(error.code))
    }

    func subscribe(_ connection: ConnectionID, to topics: [String], resumeAfter: UInt64? = nil, epoch: UInt64? = nil)
        async throws -> Mentory_V1_SubscribeReply
    {
        var request = Mentory_V1_SubscribeRequest()
        request.topics = topics.map { topic in
            var subscription = Mentory_V1_TopicSubscription()
            subscription.topic = topic
            if let resumeAfter { subscription.resumeAfter = resumeAfter }
            subscription.epoch = epoch ?? 0
            return subscription
        }
        return try await self.call(WireNames.session, "subscribe", request, from: connection)
    }
}

/// The size of the frame payload carrying `response`.
func frameSize(_ response: Mentory_V1_Response) throws -> Int {
    var envelope = Mentory_V1_Envelope()
    envelope.response = response
    return try (envelope.serializedBytes() as [UInt8]).count
}

/// The size of the frame payload carrying `event`.
func frameSize(_ event: Mentory_V1_Event) throws -> Int {
    var envelope = Mentory_V1_Envelope()
    envelope.event = event
    return try (envelope.serializedBytes() as [UInt8]).count
}
