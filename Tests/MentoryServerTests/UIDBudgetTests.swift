import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import NIOCore
import NIOEmbedded
import SwiftProtobuf
import Testing

@testable import MentoryServer

/// Several connections on one loop, of the uids asked, sharing one ``UIDBudgets`` as the server's do.
private struct Connections {
    let loop: NIOAsyncTestingEventLoop
    let channels: [NIOAsyncTestingChannel]
    let budgets: NIOLoopBound<UIDBudgets>

    init(
        uids: [UInt32], register: (MentoryEngine) async throws -> Void = { _ in },
        configure: (inout ServerConfiguration) -> Void
    ) async throws {
        var configuration = ServerConfiguration(listener: .path("/unused"))
        configure(&configuration)
        let loop = NIOAsyncTestingEventLoop()
        let engine = MentoryEngine(
            configuration: .init(serverVersion: "test", daemonUID: 1000), executor: loop.executor)
        try await engine.register(BlobHandler())
        try await register(engine)
        let settings = configuration
        let budgets = try await loop.executeInContext {
            NIOLoopBound(UIDBudgets(settings), eventLoop: loop)
        }
        var channels: [NIOAsyncTestingChannel] = []
        for (index, uid) in uids.enumerated() {
            let channel = NIOAsyncTestingChannel(loop: loop)
            try await loop.executeInContext {
                let handler = ConnectionHandler(
                    engine: engine,
                    id: ConnectionID(UInt64(index + 1)),
                    configuration: settings,
                    credentials: PeerCredentials(pid: 1, uid: uid, gid: uid),
                    logger: Logger(label: "test"),
                    budgets: budgets.value
                )
                try channel.pipeline.syncOperations.addHandlers([PeerSimulator(), handler])
            }
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
            channels.append(channel)
        }
        self.loop = loop
        self.channels = channels
        self.budgets = budgets
    }

    func send(_ index: Int, _ envelopes: [Mentory_V1_Envelope]) async throws {
        var buffer = ByteBuffer()
        for envelope in envelopes { buffer.writeFrame(envelope) }
        try await self.channels[index].writeInbound(buffer)
        await self.loop.run()
    }

    /// The responses connection `index` has sent so far (its peer simulator passes them on unless holding).
    func responses(_ index: Int) async throws -> [UInt64] {
        await self.loop.run()
        var ids: [UInt64] = []
        while var frame = try await self.channels[index].readOutbound(as: ByteBuffer.self) {
            while frame.readableBytes > 0 {
                let length = Int(frame.readInteger(as: UInt32.self)!)
                let envelope = try Mentory_V1_Envelope(frame: frame.readSlice(length: length)!)
                if case .response(let response) = envelope.kind { ids.append(response.id) }
            }
        }
        return ids
    }

    func peer<Result: Sendable>(_ index: Int, _ body: @escaping @Sendable (PeerSimulator) -> Result) async throws
        -> Result
    {
        let channel = self.channels[index]
        return try await self.loop.executeInContext {
            body(try channel.pipeline.syncOperations.handler(type: PeerSimulator.self))
        }
    }

    func hello(_ index: Int) async throws {
        try await self.send(index, [helloEnvelope(clientName: "budget-test")])
        _ = try await self.responses(index)
    }

    /// The responses connection `index` has sent so far, whole.
    func fullResponses(_ index: Int) async throws -> [Mentory_V1_Response] {
        await self.loop.run()
        var responses: [Mentory_V1_Response] = []
        while var frame = try await self.channels[index].readOutbound(as: ByteBuffer.self) {
            while frame.readableBytes > 0 {
                let length = Int(frame.readInteger(as: UInt32.self)!)
                let envelope = try Mentory_V1_Envelope(frame: frame.readSlice(length: length)!)
                if case .response(let response) = envelope.kind { responses.append(response) }
            }
        }
        return responses
    }

    /// The requests in flight of `uid`'s account (0 once it is dropped).
    func requestsInFlight(of uid: UInt32) async throws -> Int {
        let budgets = self.budgets
        return try await self.loop.executeInContext { budgets.value.accounts[uid]?.requestsInFlight ?? 0 }
    }

    /// The queued bytes of `uid`'s account (0 once it is dropped).
    func queuedBytes(of uid: UInt32) async throws -> Int {
        let budgets = self.budgets
        return try await self.loop.executeInContext { budgets.value.accounts[uid]?.queuedBytes ?? 0 }
    }

    func finish() async throws {
        for channel in self.channels { _ = try await channel.finish() }
    }
}

@Suite("Per-uid budgets: one uid's connections counted together")
struct UIDBudgetTests {
    @Test("over its uid's budget a connection stops dispatching and reading; another uid is served; all resume")
    func uidBudgetStopsAndResumes() async throws {
        // Two connections of uid 1000 and one of uid 2000; each connection alone could queue 1 MiB, the uid 8 KiB.
        let connections = try await Connections(uids: [1000, 1000, 2000]) {
            $0.maxFrameLength = 1024
            $0.maxOutboundBytes = 1 << 20
            $0.uidQueuedBytes = 8192
        }
        for index in 0..<3 { try await connections.hello(index) }
        try await connections.peer(0) { $0.holding = true }
        try await connections.send(0, (1...40).map { Harness.blob($0, bytes: 1000) })
        let held = try await connections.peer(0) { $0.heldFrames }
        #expect(held >= 8 && held <= 10, "dispatch stops at the uid's 8 KiB, not the connection's 1 MiB: \(held)")
        #expect(try await connections.queuedBytes(of: 1000) >= 8192)

        try await connections.send(1, [Harness.request(100, "session", "ping")])
        #expect(try await connections.responses(1).isEmpty, "the uid's other connection waits too")
        let readsBefore = try await connections.peer(1) { $0.reads }
        connections.channels[1].read()
        await connections.loop.run()
        #expect(try await connections.peer(1) { $0.reads } == readsBefore, "and is not read while its request waits")

        try await connections.send(2, [Harness.request(200, "session", "ping")])
        #expect(try await connections.responses(2) == [200], "another uid is served meanwhile")

        var answered: [UInt64] = []
        var rounds = 0
        while answered.count < 40, rounds < 40 {
            rounds += 1
            try await connections.peer(0) { $0.release() }
            answered += try await connections.responses(0)
        }
        #expect(answered == Array(1...40), "nothing dropped, in order")
        #expect(try await connections.responses(1) == [100], "the waiting connection was woken once there was room")
        try await connections.peer(0) { $0.holding = false }
        _ = try await connections.responses(0)
        #expect(try await connections.queuedBytes(of: 1000) == 0, "every byte counted was counted out")
        try await connections.finish()
    }

    @Test("events over the uid's budget are refused; the subscriber gets a reset once the uid drains")
    func eventsOverBudgetReset() async throws {
        let connections = try await Connections(uids: [1000, 1000]) {
            $0.maxFrameLength = 1024
            $0.maxOutboundBytes = 1 << 20
            $0.subscriberQueueBytes = 1 << 20
            $0.uidQueuedBytes = 8192
        }
        for index in 0..<2 { try await connections.hello(index) }
        try await connections.send(0, [try Harness.subscribeToBlob(1)])
        _ = try await connections.responses(0)
        try await connections.peer(0) { $0.holding = true }
        // The publisher is the same uid and reads: only the subscriber's held events fill the uid's budget.
        for id in 2...30 {
            try await connections.send(1, [Harness.blob(UInt64(id), bytes: 900, method: "publish")])
            _ = try await connections.responses(1)
        }
        let held = try await connections.peer(0) { $0.heldFrames }
        #expect(held < 29, "events stop at the uid's budget: \(held) of 29 queued")
        var events: [Mentory_V1_Event] = []
        var rounds = 0
        while !events.contains(where: { $0.kind == .reset }), rounds < 20 {
            rounds += 1
            try await connections.peer(0) { $0.release() }
            await connections.loop.run()
            while var frame = try await connections.channels[0].readOutbound(as: ByteBuffer.self) {
                while frame.readableBytes > 0 {
                    let length = Int(frame.readInteger(as: UInt32.self)!)
                    let envelope = try Mentory_V1_Envelope(frame: frame.readSlice(length: length)!)
                    if case .event(let event) = envelope.kind { events.append(event) }
                }
            }
        }
        #expect(events.contains { $0.kind == .reset }, "what was refused comes back as a reset")
        try await connections.finish()
    }

    @Test("a call on a client's behalf takes one of its uid's requests in flight; refused at the budget")
    func callOnBehalfCounted() async throws {
        for (limit, refused) in [(1, true), (2, false)] {
            let connections = try await Connections(
                uids: [1000], register: { try await $0.register(RelayHandler()) }
            ) { $0.uidRequestsInFlight = limit }
            try await connections.hello(0)
            try await connections.send(
                0, [Harness.request(1, "relay", "get", Google_Protobuf_UInt32Value(UInt32(10)).wireBody())])
            var responses: [Mentory_V1_Response] = []
            // The relay's task and its nested call take a few turns of the loop.
            for _ in 0..<20 where responses.isEmpty { responses = try await connections.fullResponses(0) }
            let response = try #require(responses.first)
            if refused {
                #expect(
                    response.error.code == UInt32(Mentory_V1_ErrorCode.tooManyRequests.rawValue),
                    "relay.get holds the uid's one request in flight, so its call of blob.get is refused")
                #expect(response.error.message.contains("relay -> blob.get"), "\(response.error.message)")
            } else {
                #expect(response.body.count > 0, "with room for both: \(response.error.message)")
            }
            #expect(try await connections.requestsInFlight(of: 1000) == 0, "every request counted was counted out")
            try await connections.finish()
        }
    }

    @Test("a reply's size is reserved from the largest reply its method gave, a whole frame before the first")
    func reservations() {
        let budgets = UIDBudgets(
            limits: .init(queuedBytesPerUID: 1 << 20, requestsInFlightPerUID: 4, totalQueuedBytes: 1 << 20),
            maxFrameLength: 4096)
        #expect(budgets.reservation(for: "diary.list") == 4100)
        budgets.learn("diary.list", replyBytes: 300)
        budgets.learn("diary.list", replyBytes: 200)
        #expect(budgets.reservation(for: "diary.list") == 300)
        let tiny = UIDBudgets(
            limits: .init(queuedBytesPerUID: 10, requestsInFlightPerUID: 4, totalQueuedBytes: 10), maxFrameLength: 4096)
        #expect(tiny.limits.queuedBytesPerUID == 6 * 4100, "raised to two snapshots, so a woken connection fits one")
        let account = budgets.open(uid: 7)
        for _ in 0..<4 { account.requestStarted() }
        #expect(!account.hasRoom, "at the uid's requests in flight")
        account.requestFinished()
        #expect(account.hasRoom)
    }
}

/// `relay.get` asks `blob.get` on its caller's behalf.
enum RelaySchema: NamespaceSchema {
    static let name = "relay"
    static let version: UInt32 = 1
    static let get = MethodSchema<RelaySchema, Google_Protobuf_UInt32Value, Google_Protobuf_BytesValue>(name: "get")
    static let methods: [MethodInfo] = [get.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentorySchema.fileDescriptors }
}

struct RelayHandler: MentoryHandler {
    typealias Namespace = RelaySchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.get) { request, call, context in
            try await context.call(BlobSchema.get, request, for: call)
        }
    }
}
