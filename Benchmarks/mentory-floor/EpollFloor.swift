import Glibc
import MentoryEventLoop
import NIOCore

// The epoll floor: the connection layer mentoryd serves on since 2026-11-29 (SocketConnection), at its least, on
// mentoryd's own epoll loop (MentoryEventLoop): one thread, level-triggered, as Redis's. Each ready
// connection gets one `read` into its own input buffer, its frames are answered in place (FloorProtocol, the same
// code as the NIO floor's) into its own output buffer, and at the end of the loop's turn (an EpollTurnEndHandler)
// each connection with output gets one `write`. The kernel's answer says at once whether all was taken; only what
// was not waits for writability. No channel, pipeline, NIOAny, promise or writability event: ByteBuffer remains,
// as mentoryd's frames are ByteBuffers. What is done with the frames read is an `EpollAnswerer`'s: the floor
// protocol's (`TopicAnswerer`, here), or mentoryd's engine's (EngineFloor.swift).

/// What a transport on the epoll loop does with the frames its connections read.
protocol EpollAnswerer: AnyObject {
    /// Answers the whole frames at the front of `connection.input` into `connection.out` (and other connections'
    /// outputs, listed for their writes through `loop`), consuming them; `false` closes the connection.
    func answerFrames(of connection: EpollConnection, on loop: EpollFloor) -> Bool
    /// `connection` was closed.
    func closed(_ connection: EpollConnection)
}

/// The floor protocol (FloorProtocol.swift) on the epoll loop, with its one topic.
final class TopicAnswerer: EpollAnswerer {
    private let topic = FloorTopic<EpollConnection>()

    func answerFrames(of connection: EpollConnection, on loop: EpollFloor) -> Bool {
        FloorProtocol.answerFrames(in: &connection.input, for: connection, topic: self.topic)
        return true
    }

    func closed(_ connection: EpollConnection) {
        if connection.subscribed { self.topic.subscribers.removeAll { $0 === connection } }
    }
}

/// One accepted connection: its descriptor, its registration and its two byte streams.
final class EpollConnection: FloorPeer, EpollHandler {
    let descriptor: Int32
    /// Unique within the run, from 1.
    let number: UInt64
    /// What was read and not yet answered: at most a partial frame between reads.
    var input: ByteBuffer
    var out: ByteBuffer
    /// Subscribed to the floor's topic (TopicAnswerer), or attached to the engine (EngineAnswerer).
    var subscribed = false
    /// Listed for the write at the end of the loop's turn.
    var listedForWrite = false
    /// Watched for writability: the kernel did not take everything written.
    var waitsForWritable = false
    var registration: EpollRegistration?
    /// Until `EpollFloor.close(_:)`.
    var isOpen = true
    /// Held strongly (an unowned reference costs a check on each use): the floor holds connections only while
    /// they are listed for a write, or subscribed to its topic until they close.
    private let floor: EpollFloor

    init(descriptor: Int32, number: UInt64, floor: EpollFloor, allocator: ByteBufferAllocator) {
        self.descriptor = descriptor
        self.number = number
        self.floor = floor
        self.input = allocator.buffer(capacity: EpollFloor.readSize)
        self.out = allocator.buffer(capacity: 4096)
    }

    func touched(_ subscriber: EpollConnection) {
        self.floor.listForWrite(subscriber)
    }

    func ready(_ events: EpollEvents, registration: EpollRegistration) {
        if !events.isDisjoint(with: [.readable, .hangUp, .error]) { self.floor.read(self) }
        if events.contains(.writable), self.isOpen { self.floor.listForWrite(self) }
    }

    func loopShutDown(registration: EpollRegistration) {
        Glibc.close(self.descriptor)
    }
}

/// The listening socket: accepts every connection waiting, each time it is readable. It holds the floor, as the
/// loop holds it while registered.
final class EpollListener: EpollHandler {
    private let floor: EpollFloor

    init(floor: EpollFloor) {
        self.floor = floor
    }

    func ready(_ events: EpollEvents, registration: EpollRegistration) {
        self.floor.acceptAll(from: registration)
    }

    func loopShutDown(registration: EpollRegistration) {
        Glibc.close(registration.descriptor)
    }
}

/// The floor: the listening socket and the connections, on an `EpollEventLoop`.
final class EpollFloor: EpollTurnEndHandler {
    /// The most one `read` takes, as Redis's PROTO_IOBUF_LEN.
    static let readSize = 16 * 1024

    private var listed: [EpollConnection] = []
    private var writing: [EpollConnection] = []
    private var accepted: UInt64 = 0
    private let allocator = ByteBufferAllocator()
    private let answerer: any EpollAnswerer

    private init(answerer: any EpollAnswerer) {
        self.answerer = answerer
    }

    /// Listens on `path` and serves its connections on `loop` with the answerer `makeAnswerer` makes there.
    static func start(
        path: String, on loop: EpollEventLoop, makeAnswerer: @escaping @Sendable () -> any EpollAnswerer
    ) throws {
        let listener = try StreamSocket.listen(unixPath: path, backlog: 512)
        try loop.submit(withSelector: { selector in
            let floor = EpollFloor(answerer: makeAnswerer())
            _ = try selector.register(listener, interest: .readable, handler: EpollListener(floor: floor))
        }).wait()
    }

    func listForWrite(_ connection: EpollConnection) {
        guard !connection.listedForWrite else { return }
        connection.listedForWrite = true
        self.listed.append(connection)
        if self.listed.count == 1 { connection.registration?.selector.atEndOfTurn(self) }
    }

    /// At the end of the turn: one write per connection with output.
    func turnEnded() {
        swap(&self.listed, &self.writing)
        for connection in self.writing {
            connection.listedForWrite = false
            if connection.isOpen { self.write(connection) }
        }
        self.writing.removeAll(keepingCapacity: true)
    }

    func acceptAll(from listener: EpollRegistration) {
        // Until none waits; out of descriptors, say, the next wake-up tries again.
        while let descriptor = try? StreamSocket.accept(listener.descriptor) {
            self.accepted += 1
            let connection = EpollConnection(
                descriptor: descriptor, number: self.accepted, floor: self, allocator: self.allocator)
            do {
                connection.registration = try listener.selector.register(
                    descriptor, interest: .readable, handler: connection)
            } catch {
                Glibc.close(descriptor)
            }
        }
    }

    func read(_ connection: EpollConnection) {
        switch StreamSocket.read(connection.descriptor, into: &connection.input, maximumBytes: Self.readSize) {
        case .read: break
        case .wouldBlock: return
        case .endOfInput, .failed: return self.close(connection)
        }
        // Listed before the subscribers its frames give events to, so that its own replies are written first, as
        // the NIO floor flushes the reader before the subscribers (a publisher waits for its replies to send more).
        self.listForWrite(connection)
        guard self.answerer.answerFrames(of: connection, on: self) else { return self.close(connection) }
        if connection.input.readableBytes == 0 {
            connection.input.clear()
        } else {
            connection.input.discardReadBytes()
        }
    }

    private func write(_ connection: EpollConnection) {
        while connection.out.readableBytes > 0 {
            switch StreamSocket.write(connection.descriptor, from: &connection.out) {
            case .wrote: continue
            case .wouldBlock:
                if !connection.waitsForWritable {
                    connection.waitsForWritable = true
                    try? connection.registration?.setInterest([.readable, .writable])
                }
                return
            case .failed: return self.close(connection)
            }
        }
        connection.out.clear()
        if connection.waitsForWritable {
            connection.waitsForWritable = false
            try? connection.registration?.setInterest(.readable)
        }
    }

    private func close(_ connection: EpollConnection) {
        guard connection.isOpen else { return }
        connection.isOpen = false
        connection.registration?.deregister()
        _ = Glibc.close(connection.descriptor)
        self.answerer.closed(connection)
    }
}
