import Foundation
import MentoryDomain
import MentoryWire
import NIOCore

/// Counts deliveries and records change-to-delivery latency. Loop-confined.
class SubscriberCounter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var count = 0
    var latencies: [UInt64] = []
    var lastDelivery: UInt64 = 0
    let ready: EventLoopPromise<Void>
    var isReady = false

    init(ready: EventLoopPromise<Void>) {
        self.ready = ready
    }

    /// Counts a delivery; records its latency when the change was published in the paced phase.
    func delivered(_ payload: Substring) {
        let now = monotonicNanoseconds()
        self.count += 1
        self.lastDelivery = now
        if payload.hasPrefix(Payload.paced), let published = Self.timestamp(in: payload), now > published {
            self.latencies.append(now - published)
        }
    }

    // The protocol's witness lives here, so subclasses override `received(_:)`, not this.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.received(Self.unwrapInboundIn(data))
    }

    /// Handles one decoded frame (mentoryd) or reply (redis).
    func received(_ buffer: ByteBuffer) {}

    func markReady() {
        if !self.isReady {
            self.isReady = true
            self.ready.succeed()
        }
    }

    static func timestamp(in text: Substring) -> UInt64? {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        return UInt64(text[text.index(after: equals)...])
    }
}

/// What a published change carries: its phase, then its publish time in monotonic nanoseconds.
enum Payload {
    /// A change of the throughput phase, published as fast as the server takes them.
    static let burst = "b="
    /// A change of the latency phase, published one at a time at a steady pace.
    static let paced = "l="
}

/// A mentoryd subscriber: decodes each envelope and the mentor state inside it, as a client must.
final class MentorySubscriberHandler: SubscriberCounter {
    override func received(_ frame: ByteBuffer) {
        guard let envelope = try? Mentory_V1_Envelope(frame: frame) else { return }
        switch envelope.kind {
        case .response:
            self.markReady()
        case .event(let event) where event.kind == .change:
            guard let state = try? Mentory_V1_MentorState(serializedBytes: event.body) else { return }
            self.delivered(Substring(state.message.content))
        default:
            break
        }
    }
}

/// A redis pub/sub subscriber.
final class RedisSubscriberHandler: SubscriberCounter {
    override func received(_ buffer: ByteBuffer) {
        var reply = buffer
        guard let text = reply.readString(length: reply.readableBytes) else { return }
        if text.hasPrefix("subscribe") {
            self.markReady()
        } else if text.hasPrefix("message"), let payload = text.split(separator: "\n").last {
            self.delivered(payload)
        }
    }
}

/// Decodes RESP replies into one buffer per reply: the kind of push, then its last element, joined by a newline.
struct RESPDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        var probe = buffer
        guard let elements = Self.parse(&probe) else { return .needMoreData }
        buffer = probe
        context.fireChannelRead(Self.wrapInboundOut(ByteBuffer(string: elements.joined(separator: "\n"))))
        return .continue
    }

    /// Parses one reply; nil when incomplete.
    static func parse(_ buffer: inout ByteBuffer) -> [String]? {
        guard let line = readLine(&buffer), let kind = line.first else { return nil }
        switch kind {
        case "*":
            guard let count = Int(line.dropFirst()) else { return [] }
            var parts: [String] = []
            for _ in 0..<max(count, 0) {
                guard let part = parse(&buffer) else { return nil }
                parts += part
            }
            return parts
        case "$":
            guard let length = Int(line.dropFirst()) else { return [] }
            if length < 0 { return [""] }
            guard buffer.readableBytes >= length + 2, let text = buffer.readString(length: length) else { return nil }
            buffer.moveReaderIndex(forwardBy: 2)
            return [text]
        default:
            return [String(line.dropFirst())]
        }
    }

    static func readLine(_ buffer: inout ByteBuffer) -> String? {
        guard let end = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\r")),
            end + 1 < buffer.writerIndex
        else { return nil }
        let line = buffer.readString(length: end - buffer.readerIndex)
        buffer.moveReaderIndex(forwardBy: 2)
        return line
    }
}
