import Glibc
import NIOCore
import NIOPosix

// mentory-nio-floor - the least a SwiftNIO server must do to serve mentoryd's protocol, for
// scripts/bench.sh (issue 32's "floor of this design"). A benchmark, not a server.
//
//     mentory-nio-floor --socket PATH [--flush read|tick]
//
// NIOPosix's ServerBootstrap on one event loop thread, with the options of mentoryd's
// (MentoryServer.makeBootstrap): backlog 512, autoRead. One channel handler per connection finds
// the frame boundaries of what Benchmarks/loadgen sends and answers each frame with the bytes
// mentoryd would send, encoded once at start; only the request id is copied from each request.
// No protobuf decoding, no engine, no metrics: what is left is NIO's channel machinery (read,
// pipeline, write, flush, selector) and a memcpy per reply. The replies of one read go into one
// buffer, written and flushed once at channelReadComplete, as NIOEchoServer does (`--flush read`,
// the default); `--flush tick` instead flushes every connection's buffer once at the end of the
// event loop's tick (one task per tick, as mentoryd's TickFlusher and Redis's beforeSleep do).
//
// Frames (Sources/MentoryWire/Proto/mentory.proto, as captured from mentoryd):
// - Hello (Envelope field 1): the Welcome mentoryd sends, 304 bytes.
// - Request session.ping: Response{id, body: empty}.
// - Request session.subscribe: a SNAPSHOT Event, then Response{id, body}; the connection becomes
//   a subscriber of the one topic.
// - Request mentor.set (Benchmarks/loadgen/fanout.c): Response{id, body} to the publisher, and an
//   Event{topic "mentor", sequence, kind CHANGE, body, epoch} to every subscriber, its body the
//   request's body. Each subscriber's events of one publisher read are written and flushed once,
//   at the publisher's channelReadComplete.

/// Bytes mentoryd sends, captured from a mentoryd built from this repository.
enum Reply {
    /// The Welcome frame's payload (without its 4-byte length), as mentoryd 0.1.0 sends it.
    static let welcome: [UInt8] = hex(
        """
        12a90208011205302e312e301a4b0a0773657373696f6e120470696e67120673746174757312097375627363726962651\
        20b756e7375627363726962651208646573637269626512076d6f6e69746f7212076d6574726963731a210a06706c7567\
        696e1208726567697374657212077075626c697368120463616c6c1a280a066d656e746f7212037365741203676574120c\
        636f6d706c657465546f646f1a066d656e746f721a290a0c72656163686162696c69747912067265706f72741203676574\
        1a0c72656163686162696c6974791a390a0564696172791203616464120367657412046c697374120664656c6574651211\
        73657453756767657374696f6e446f6e651a0564696172791a100a066461656d6f6e120672656c6f61642080804028a2d0\
        d0d5dc9ed79861
        """
    )
    /// The SNAPSHOT event mentoryd sends on subscribing to `mentor` (whole frame).
    static let snapshot: [UInt8] = hex("000000162a140a066d656e746f72180128a2d0d0d5dc9ed79861")
    /// session.subscribe's Response body (field 2, with its key and length).
    static let subscribeBody: [UInt8] = hex("12140a080a066d656e746f7210a2d0d0d5dc9ed79861")
    /// mentor.set's Response body (field 2, with its key and length), as for content "b=0".
    static let setBody: [UInt8] = hex("12100a0e0a03623d30100120be8dfd96a234")
    /// session.ping's Response body: field 2, empty.
    static let pingBody: [UInt8] = [0x12, 0x00]
    /// The event's fields before its body: topic "mentor" (field 1).
    static let eventTopic: [UInt8] = hex("0a066d656e746f72")
    /// The event's epoch (field 5).
    static let eventEpoch: [UInt8] = hex("28a2d0d0d5dc9ed79861")

    static func hex(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8).filter { $0 != UInt8(ascii: "\n") }
        func nibble(_ c: UInt8) -> UInt8 {
            c <= UInt8(ascii: "9") ? c &- UInt8(ascii: "0") : c &- UInt8(ascii: "a") &+ 10
        }
        return stride(from: 0, to: digits.count, by: 2).map { nibble(digits[$0]) << 4 | nibble(digits[$0 + 1]) }
    }
}

/// The subscribers of the one topic and the sequence number; used on the event loop only.
final class Hub {
    var subscribers: [FloorHandler] = []
    var sequence: UInt64 = 0
    /// `--flush tick`: flush at the end of the tick instead of at each channelReadComplete.
    var flushAtTickEnd = false
    /// The connections with replies waiting for the end of the tick.
    var dirty: [FloorHandler] = []
    var flushScheduled = false

    /// Hands `handler`'s replies to the socket now, or at the end of the tick.
    func flush(_ handler: FloorHandler, bound: NIOLoopBound<Hub>) {
        guard self.flushAtTickEnd else {
            handler.flushOut()
            return
        }
        self.dirty.append(handler)
        if !self.flushScheduled {
            self.flushScheduled = true
            bound.eventLoop.execute { bound.value.flushAll() }
        }
    }

    private func flushAll() {
        self.flushScheduled = false
        for handler in self.dirty {
            handler.flushOut()
        }
        self.dirty.removeAll(keepingCapacity: true)
    }
}

/// Splits frames and answers them with the pre-encoded replies.
final class FloorHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let hub: Hub
    private let bound: NIOLoopBound<Hub>
    /// A partial frame carried to the next read.
    private var cumulation: ByteBuffer?
    /// The replies of the current read (and the events of other connections' reads for a subscriber).
    private var out: ByteBuffer
    /// Subscribers given events during this read, flushed at channelReadComplete.
    private var touched: [FloorHandler] = []
    private var context: ChannelHandlerContext?
    private var subscribed = false

    init(hub: NIOLoopBound<Hub>, allocator: ByteBufferAllocator) {
        self.hub = hub.value
        self.bound = hub
        self.out = allocator.buffer(capacity: 4096)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        if self.subscribed {
            self.hub.subscribers.removeAll { $0 === self }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        if var partial = self.cumulation {
            self.cumulation = nil
            partial.writeBuffer(&buffer)
            buffer = partial
        }
        while let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self),
            buffer.readableBytes - 4 >= Int(length)
        {
            let start = buffer.readerIndex + 4
            self.answer(buffer, at: start, length: Int(length))
            buffer.moveReaderIndex(forwardBy: 4 + Int(length))
        }
        if buffer.readableBytes > 0 {
            self.cumulation = buffer
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.hub.flush(self, bound: self.bound)
        for subscriber in self.touched {
            self.hub.flush(subscriber, bound: self.bound)
        }
        self.touched.removeAll(keepingCapacity: true)
    }

    /// Writes and flushes what `out` holds, once.
    func flushOut() {
        guard self.out.readableBytes > 0, let context = self.context else { return }
        context.writeAndFlush(Self.wrapOutboundOut(self.out), promise: nil)
        // NIO has written it (or holds its own reference): clearing reuses the storage when unique.
        self.out.clear()
    }

    /// Appends the reply to the frame whose payload is `buffer[start..<start+length]`.
    private func answer(_ buffer: ByteBuffer, at start: Int, length: Int) {
        guard let tag = buffer.getInteger(at: start, as: UInt8.self) else { return }
        if tag == 0x0A {  // Envelope.hello
            self.out.writeInteger(UInt32(Reply.welcome.count))
            self.out.writeBytes(Reply.welcome)
            return
        }
        guard tag == 0x1A else { return }  // Envelope.request
        // Request{1: id, 2: namespace, 3: method, 4: body}, in that order, as clients write it.
        var at = start + 1
        let end = start + length
        guard Self.varint(buffer, at: &at, end: end) != nil, buffer.getInteger(at: at, as: UInt8.self) == 0x08
        else { return }
        let idStart = at + 1
        at = idStart
        guard Self.varint(buffer, at: &at, end: end) != nil else { return }
        let idLength = at - idStart
        // The namespace's first letter tells session from mentor, the method's length ping from subscribe.
        guard buffer.getInteger(at: at, as: UInt8.self) == 0x12,
            let namespaceLength = buffer.getInteger(at: at + 1, as: UInt8.self),
            let first = buffer.getInteger(at: at + 2, as: UInt8.self)
        else { return }
        at += 2 + Int(namespaceLength)
        let methodLength = buffer.getInteger(at: at + 1, as: UInt8.self) ?? 0
        at += 2 + Int(methodLength)
        let body: [UInt8]
        if first == UInt8(ascii: "m") {
            body = Reply.setBody
            self.publish(buffer, bodyAt: at, end: end)
        } else if methodLength == 9 {
            body = Reply.subscribeBody
            self.out.writeBytes(Reply.snapshot)
            if !self.subscribed {
                self.subscribed = true
                self.hub.subscribers.append(self)
            }
        } else {
            body = Reply.pingBody
        }
        // Envelope{4: Response{1: id, 2: body}}; both lengths fit one byte here.
        let responseLength = 1 + idLength + body.count
        self.out.writeInteger(UInt32(2 + responseLength))
        self.out.writeInteger(UInt16(0x2200 | UInt16(responseLength)))
        self.out.writeInteger(UInt8(0x08))
        var idBytes = buffer.getSlice(at: idStart, length: idLength)!
        self.out.writeBuffer(&idBytes)
        self.out.writeBytes(body)
    }

    /// Sends the request body at `buffer[at..<end]` (field 4, with key and length) as a CHANGE event to every
    /// subscriber, into each one's `out`.
    private func publish(_ buffer: ByteBuffer, bodyAt at: Int, end: Int) {
        guard !self.hub.subscribers.isEmpty else { return }
        self.hub.sequence += 1
        var sequence = ByteBuffer()
        Self.writeVarint(self.hub.sequence, into: &sequence)
        let bodyLength = end - at  // Event.body is field 4, as Request.body: the same key, length and bytes.
        let eventLength = Reply.eventTopic.count + 1 + sequence.readableBytes + bodyLength + Reply.eventEpoch.count
        var event = ByteBuffer()
        event.reserveCapacity(4 + 3 + eventLength)
        var envelope = ByteBuffer()
        Self.writeVarint(UInt64(eventLength), into: &envelope)
        event.writeInteger(UInt32(1 + envelope.readableBytes + eventLength))
        event.writeInteger(UInt8(0x2A))  // Envelope.event
        event.writeBuffer(&envelope)
        event.writeBytes(Reply.eventTopic)
        event.writeInteger(UInt8(0x10))  // Event.sequence
        event.writeBuffer(&sequence)
        var body = buffer.getSlice(at: at, length: bodyLength)!
        event.writeBuffer(&body)
        event.writeBytes(Reply.eventEpoch)
        for subscriber in self.hub.subscribers {
            // An empty `out` is not yet listed for a flush this tick (nor in Hub.dirty).
            if subscriber.out.readableBytes == 0, subscriber !== self {
                self.touched.append(subscriber)
            }
            subscriber.out.writeImmutableBuffer(event)
        }
    }

    private static func varint(_ buffer: ByteBuffer, at: inout Int, end: Int) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while at < end, shift < 64, let byte = buffer.getInteger(at: at, as: UInt8.self) {
            at += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    private static func writeVarint(_ value: UInt64, into buffer: inout ByteBuffer) {
        var value = value
        while value >= 0x80 {
            buffer.writeInteger(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        buffer.writeInteger(UInt8(value))
    }
}

let arguments = CommandLine.arguments
guard let flag = arguments.firstIndex(of: "--socket"), arguments.indices.contains(flag + 1) else {
    print("usage: mentory-nio-floor --socket PATH [--flush read|tick]")
    exit(2)
}
let path = arguments[flag + 1]
let flushAtTickEnd = arguments.firstIndex(of: "--flush").map { arguments.dropFirst($0 + 1).first == "tick" } ?? false

// Room for the fan-out row's 1,000 subscribers, as mentoryd raises its own limit.
var limit = rlimit()
if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
unlink(path)

// One thread, as mentoryd's event loop (MentoryDaemonKit's Daemon).
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()
let hub = try loop.submit {
    let hub = Hub()
    hub.flushAtTickEnd = flushAtTickEnd
    return NIOLoopBound(hub, eventLoop: loop)
}.wait()
let channel = try ServerBootstrap(group: loop)
    .serverChannelOption(.backlog, value: 512)
    .childChannelOption(.autoRead, value: true)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let handler = FloorHandler(hub: hub, allocator: channel.allocator)
            try channel.pipeline.syncOperations.addHandler(handler)
        }
    }
    .bind(unixDomainSocketPath: path)
    .wait()
try channel.closeFuture.wait()
