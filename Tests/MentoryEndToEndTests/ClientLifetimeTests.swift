import Foundation
import Glibc
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import MentoryClient

/// A fake daemon that completes the handshake, answers `session.subscribe` only if told to,
/// and counts its open connections.
final class FakeDaemon: Sendable {
    let socketPath: String
    private let channel: any Channel
    private let counter: ConnectionCounter

    final class ConnectionCounter: Sendable {
        let open = Atomic<Int>(0)
        let accepted = Atomic<Int>(0)
    }

    var openConnections: Int { self.counter.open.load(ordering: .relaxed) }
    var acceptedConnections: Int { self.counter.accepted.load(ordering: .relaxed) }

    init(socketPath: String, answersSubscribe: Bool, answersHello: Bool = true) async throws {
        self.socketPath = socketPath
        let counter = ConnectionCounter()
        self.counter = counter
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(LengthPrefixedFrameDecoder()),
                        MessageToByteHandler(EnvelopeFrameEncoder()),
                        FakeDaemonHandler(
                            counter: counter, answersSubscribe: answersSubscribe, answersHello: answersHello),
                    ])
                }
            }
            .bind(unixDomainSocketPath: socketPath)
            .get()
    }

    func stop() async {
        try? await self.channel.close()
    }
}

final class FakeDaemonHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = Mentory_V1_Envelope

    let counter: FakeDaemon.ConnectionCounter
    let answersSubscribe: Bool
    let answersHello: Bool

    init(counter: FakeDaemon.ConnectionCounter, answersSubscribe: Bool, answersHello: Bool) {
        self.counter = counter
        self.answersSubscribe = answersSubscribe
        self.answersHello = answersHello
    }

    func channelActive(context: ChannelHandlerContext) {
        self.counter.open.add(1, ordering: .relaxed)
        self.counter.accepted.add(1, ordering: .relaxed)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.counter.open.subtract(1, ordering: .relaxed)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let envelope = try? Mentory_V1_Envelope(frame: Self.unwrapInboundIn(data)) else { return }
        var reply = Mentory_V1_Envelope()
        switch envelope.kind {
        case .hello where self.answersHello:
            var welcome = Mentory_V1_Welcome()
            welcome.protocolVersion = WireProtocol.version
            welcome.epoch = 7
            reply.welcome = welcome
        case .request(let request) where self.answersSubscribe:
            var response = Mentory_V1_Response()
            response.id = request.id
            response.body = (try? Mentory_V1_SubscribeReply().serializedData()) ?? Data()
            reply.response = response
        default:
            return
        }
        context.writeAndFlush(Self.wrapOutboundOut(reply), promise: nil)
    }
}

@Suite("Client library lifetimes and bounds", .serialized, .timeLimit(.minutes(5)))
struct ClientLifetimeTests {
    @Test("concurrent callers of MentoryConnection.client() share one connection")
    func concurrentClient() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let observer = try await daemon.client("observer")
        let connection = MentoryConnection(socketPath: daemon.socketPath, clientName: "shared")
        let clients = try await withThrowingTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<16 {
                group.addTask { ObjectIdentifier(try await connection.client()) }
            }
            return try await group.reduce(into: Set<ObjectIdentifier>()) { $0.insert($1) }
        }
        #expect(clients.count == 1)
        // The observer and the one shared connection, once the startup probe has gone.
        #expect(try await eventually { try await observer.status().connections == 2 })
        await connection.close()
        #expect(try await eventually { try await observer.status().connections == 1 })
        await observer.close()
        await daemon.stop()
    }

    @Test("a lost connection is replaced, and the old one is not kept")
    func replaceLost() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let connection = MentoryConnection(socketPath: daemon.socketPath, clientName: "shared")
        let first = try await connection.client()
        await first.close()
        let second = try await connection.client()
        #expect(first !== second)
        try await second.ping()
        #expect(try await eventually { try await second.status().connections == 1 })
        await connection.close()
        #expect(!second.isConnected)
        await daemon.stop()
    }

    @Test("MentoryConnection.close() abandons a connection attempt in progress and leaves nothing open")
    func closeDuringConnect() async throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("fake", mode: 0o700)
        let fake = try await FakeDaemon(
            socketPath: directory + "/mentoryd.sock", answersSubscribe: false, answersHello: false)
        let connection = MentoryConnection(socketPath: fake.socketPath, clientName: "tests")
        let waiting = Task { try await connection.client() }
        #expect(await eventually { fake.openConnections == 1 }, "the handshake is under way")
        await connection.close()
        await #expect(throws: MentoryClientError.self) { try await waiting.value }
        #expect(await eventually { fake.openConnections == 0 }, "open: \(fake.openConnections)")
        #expect(fake.acceptedConnections == 1, "no retry after close()")
        await fake.stop()
    }

    @Test("a resumable subscription whose subscribe times out closes that connection before retrying")
    func subscribeTimeout() async throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("fake", mode: 0o700)
        let fake = try await FakeDaemon(socketPath: directory + "/mentoryd.sock", answersSubscribe: false)
        let subscription = MentoryClient.resumableSubscription(
            socketPath: fake.socketPath, clientName: "tests", topics: ["diary"], callTimeout: .milliseconds(200))
        var iterator = subscription.makeAsyncIterator()
        for _ in 0..<3 {
            let update = try await iterator.next()
            guard case .disconnected(let reason) = update else {
                Issue.record("expected a disconnect, got \(String(describing: update))")
                break
            }
            #expect(reason.contains("did not answer within"))
        }
        // The fake counts a connection when its loop accepts it, which can come after the client gave it up.
        #expect(await eventually { fake.acceptedConnections >= 3 }, "accepted: \(fake.acceptedConnections)")
        #expect(await eventually { fake.openConnections == 0 }, "open: \(fake.openConnections)")
        await fake.stop()
    }

    @Test("dropping or cancelling a resumable subscription closes its connection")
    func dropCloses() async throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("fake", mode: 0o700)
        let fake = try await FakeDaemon(socketPath: directory + "/mentoryd.sock", answersSubscribe: true)
        do {
            var iterator = MentoryClient.resumableSubscription(
                socketPath: fake.socketPath, clientName: "tests", topics: ["diary"]
            ).makeAsyncIterator()
            guard case .connected(let epoch) = try await iterator.next() else {
                Issue.record("not connected")
                return
            }
            #expect(epoch == 7)
            #expect(await eventually { fake.openConnections == 1 })
        }
        #expect(await eventually { fake.openConnections == 0 }, "open after drop: \(fake.openConnections)")

        let updates = FakeDaemon.ConnectionCounter()
        let task = Task {
            for try await _ in MentoryClient.resumableSubscription(
                socketPath: fake.socketPath, clientName: "tests", topics: ["diary"])
            {
                updates.accepted.add(1, ordering: .relaxed)
            }
        }
        #expect(await eventually { updates.accepted.load(ordering: .relaxed) == 1 && fake.openConnections == 1 })
        task.cancel()
        try await task.value
        #expect(updates.accepted.load(ordering: .relaxed) == 1, "the .connected update, then the end")
        #expect(await eventually { fake.openConnections == 0 }, "open after cancel: \(fake.openConnections)")
        await fake.stop()
    }

    @Test("a client's event buffer is bounded: the buffered events, then the end, and the overflow is reported")
    func eventBufferOverflow() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let writer = try await daemon.client("writer")
        let limit = 4
        let reader = try await MentoryClient.connect(
            socketPath: daemon.socketPath, clientName: "slow", defaultTimeout: .seconds(10), eventBufferLimit: limit)
        _ = try await reader.subscribe(topics: ["diary"])
        for day in 1...20 {
            try await Self.add(writer, day: day)
        }
        #expect(await eventually { reader.eventBufferOverflowed })
        var sequences: [UInt64] = []
        for await event in reader.events {
            sequences.append(event.sequence)
        }
        #expect(sequences.count == limit, "the buffered events are delivered: \(sequences)")
        #expect(
            sequences == Array((sequences.first ?? 0)..<(sequences.first ?? 0) + UInt64(sequences.count)),
            "in order, no gap")
        // Calls still work; a new subscription on this connection would be silent, so it is refused.
        try await reader.ping()
        await #expect(throws: MentoryClientError.eventBufferOverflow(limit: limit)) {
            _ = try await reader.subscribe(topics: ["diary"])
        }
        #expect(try await eventually { try await writer.status().subscribers == 0 }, "the daemon stopped sending")
        await reader.close()
        await writer.close()
        await daemon.stop()
    }

    @Test("a resumable subscription that overflows says so and resumes without a gap")
    func resumableOverflow() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let writer = try await daemon.client("writer")
        var iterator = MentoryClient.resumableSubscription(
            socketPath: daemon.socketPath, clientName: "slow", topics: ["diary"], eventBufferLimit: 4
        ).makeAsyncIterator()
        guard case .connected = try await iterator.next(), case .event(let snapshot) = try await iterator.next() else {
            Issue.record("no connection and snapshot")
            return
        }
        #expect(snapshot.kind == .snapshot)
        for day in 1...30 {
            try await Self.add(writer, day: day)
        }
        let last = snapshot.sequence + 30
        #expect(await eventually { iterator.currentClient?.eventBufferOverflowed == true })
        var position = snapshot.sequence
        var overflowed = false
        var reset = false
        while position < last {
            switch try await iterator.next() {
            case .event(let event):
                if event.kind == .reset {
                    reset = true
                } else {
                    #expect(event.sequence == position + 1, "no gap and no duplicate")
                }
                position = event.sequence
            case .overflowed(let limit):
                #expect(limit == 4)
                overflowed = true
            case .connected:
                #expect(overflowed, "reconnected only after the overflow")
            case .disconnected(let reason):
                Issue.record("disconnected: \(reason)")
            case nil:
                Issue.record("ended")
                return
            }
        }
        #expect(overflowed)
        #expect(position == last, "caught up by replay\(reset ? " or reset" : "")")
        await writer.close()
        await daemon.stop()
    }

    static func add(_ client: MentoryClient, day: Int) async throws {
        var entry = Mentory_V1_DiaryAddRequest()
        entry.recordDate = String(format: "2026-%02d-%02d", day / 28 + 1, day % 28 + 1)
        entry.title = "entry \(day)"
        entry.text = "text"
        entry.emotion = .neutral
        _ = try await client.diaryAdd(entry)
    }
}
