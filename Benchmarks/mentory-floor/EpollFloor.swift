import CEpollFloor
import Glibc
import NIOCore

// The epoll floor: the connection layer BENCHMARKS.md proposes for mentoryd below NIO's channel pipeline, at its
// least. One thread runs a hand-written level-triggered epoll loop over the socket descriptors, as Redis does:
// each ready connection gets one `read` into its own input buffer, its frames are answered in place
// (FloorProtocol, the same code as the NIO floor's) into its own output buffer, and once the ready events are
// handled ("before sleep") each connection with output gets one `write`. The kernel's answer says at once whether
// all was taken; only what was not waits for EPOLLOUT. No channel, pipeline, NIOAny, promise or writability
// event: ByteBuffer remains, as mentoryd's frames are ByteBuffers. What is done with the frames read is an
// `EpollAnswerer`'s: the floor protocol's (`TopicAnswerer`, here), or mentoryd's engine's (EngineFloor.swift).

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

/// One accepted connection: its descriptor and its two byte streams.
final class EpollConnection: FloorPeer {
    let descriptor: Int32
    /// Unique within the run, from 1.
    let number: UInt64
    /// What was read and not yet answered: at most a partial frame between reads.
    var input: ByteBuffer
    var out: ByteBuffer
    /// Subscribed to the floor's topic (TopicAnswerer), or attached to the engine (EngineAnswerer).
    var subscribed = false
    /// Listed for the write before the loop next sleeps.
    var listedForWrite = false
    /// Registered for EPOLLOUT: the kernel did not take everything written.
    var waitsForWritable = false
    var isOpen = true
    private unowned let loop: EpollFloor

    init(descriptor: Int32, number: UInt64, loop: EpollFloor, allocator: ByteBufferAllocator) {
        self.descriptor = descriptor
        self.number = number
        self.loop = loop
        self.input = allocator.buffer(capacity: EpollFloor.readSize)
        self.out = allocator.buffer(capacity: 4096)
    }

    func touched(_ subscriber: EpollConnection) {
        self.loop.listForWrite(subscriber)
    }
}

/// The loop: the listening socket, the epoll instance and the connections, on the calling thread.
final class EpollFloor {
    /// The most one `read` takes, as Redis's PROTO_IOBUF_LEN.
    static let readSize = 16 * 1024
    /// The most events one `epoll_wait` returns.
    static let maxEvents: Int32 = 512

    private let listener: Int32
    private let epoll: Int32
    /// Indexed by descriptor.
    private var connections: [EpollConnection?] = []
    private var listed: [EpollConnection] = []
    private var accepted: UInt64 = 0
    private let allocator = ByteBufferAllocator()
    private let answerer: any EpollAnswerer
    /// Runs its jobs when its eventfd is readable.
    private let executor: EpollExecutor?

    init(path: String, answerer: any EpollAnswerer, executor: EpollExecutor? = nil) throws(FloorError) {
        self.answerer = answerer
        self.executor = executor
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw FloorError("socket") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw FloorError("path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(listener, 512) == 0 else { throw FloorError("bind/listen \(path)") }
        self.listener = listener
        self.epoll = epoll_floor_create()
        guard self.epoll >= 0 else { throw FloorError("epoll_create1") }
        try self.control(self.listener, events: EPOLL_FLOOR_IN)
        if let executor { try self.control(executor.wakeup, events: EPOLL_FLOOR_IN) }
    }

    /// Serves until killed.
    func run() throws(FloorError) -> Never {
        let descriptors = UnsafeMutablePointer<Int32>.allocate(capacity: Int(Self.maxEvents))
        let events = UnsafeMutablePointer<UInt32>.allocate(capacity: Int(Self.maxEvents))
        while true {
            let ready = epoll_floor_wait(self.epoll, descriptors, events, Self.maxEvents)
            guard ready >= 0 else {
                if errno == EINTR { continue }
                throw FloorError("epoll_wait")
            }
            for index in 0..<Int(ready) {
                let (descriptor, flags) = (descriptors[index], events[index])
                if descriptor == self.listener {
                    self.acceptAll()
                    continue
                }
                if let executor = self.executor, descriptor == executor.wakeup {
                    executor.runJobs()
                    continue
                }
                guard let connection = self.connections[Int(descriptor)] else { continue }
                if flags & (EPOLL_FLOOR_IN | EPOLL_FLOOR_HUP | EPOLL_FLOOR_ERR) != 0 { self.read(connection) }
                if flags & EPOLL_FLOOR_OUT != 0, connection.isOpen { self.listForWrite(connection) }
            }
            // Before sleep: one write per connection with output.
            for connection in self.listed {
                connection.listedForWrite = false
                if connection.isOpen { self.write(connection) }
            }
            self.listed.removeAll(keepingCapacity: true)
        }
    }

    func listForWrite(_ connection: EpollConnection) {
        guard !connection.listedForWrite else { return }
        connection.listedForWrite = true
        self.listed.append(connection)
    }

    private func acceptAll() {
        while true {
            let descriptor = epoll_floor_accept(self.listener)
            guard descriptor >= 0 else { return }  // EAGAIN, or out of descriptors: the next wake-up tries again.
            self.accepted += 1
            let connection = EpollConnection(
                descriptor: descriptor, number: self.accepted, loop: self, allocator: self.allocator)
            if self.connections.count <= Int(descriptor) {
                self.connections.append(
                    contentsOf: repeatElement(nil, count: Int(descriptor) + 1 - self.connections.count))
            }
            self.connections[Int(descriptor)] = connection
            do {
                try self.control(descriptor, events: EPOLL_FLOOR_IN)
            } catch {
                self.close(connection)
            }
        }
    }

    private func read(_ connection: EpollConnection) {
        var result = 0
        connection.input.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.readSize) { room in
            result = Glibc.read(connection.descriptor, room.baseAddress, room.count)
            return max(0, result)
        }
        guard result > 0 else {
            // End of file or an error closes; a wake-up with nothing to read (EAGAIN) does not.
            if result == 0 || errno != EAGAIN { self.close(connection) }
            return
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
            let written = connection.out.withUnsafeReadableBytes {
                Glibc.write(connection.descriptor, $0.baseAddress, $0.count)
            }
            if written > 0 {
                connection.out.moveReaderIndex(forwardBy: written)
            } else if written < 0, errno == EINTR {
                continue
            } else if written < 0, errno == EAGAIN {
                if !connection.waitsForWritable {
                    connection.waitsForWritable = true
                    try? self.control(connection.descriptor, events: EPOLL_FLOOR_IN | EPOLL_FLOOR_OUT, modify: true)
                }
                return
            } else {
                return self.close(connection)
            }
        }
        connection.out.clear()
        if connection.waitsForWritable {
            connection.waitsForWritable = false
            try? self.control(connection.descriptor, events: EPOLL_FLOOR_IN, modify: true)
        }
    }

    private func close(_ connection: EpollConnection) {
        guard connection.isOpen else { return }
        connection.isOpen = false
        _ = epoll_floor_remove(self.epoll, connection.descriptor)
        _ = Glibc.close(connection.descriptor)
        self.connections[Int(connection.descriptor)] = nil
        self.answerer.closed(connection)
    }

    private func control(_ descriptor: Int32, events: UInt32, modify: Bool = false) throws(FloorError) {
        guard epoll_floor_control(self.epoll, descriptor, events, modify ? 1 : 0) == 0 else {
            throw FloorError("epoll_ctl")
        }
    }
}

/// A system call that failed, with errno's text.
struct FloorError: Error, CustomStringConvertible {
    let description: String

    init(_ what: String) {
        self.description = "\(what): \(String(cString: strerror(errno)))"
    }
}
