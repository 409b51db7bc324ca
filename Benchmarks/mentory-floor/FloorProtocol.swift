import NIOCore

// The protocol work both floors share (the NIO one in NIOFloor.swift, the epoll one in EpollFloor.swift): find
// the frame boundaries of what Benchmarks/loadgen sends, and answer each frame with the bytes mentoryd would send,
// encoded once at start; only the request id is copied from each request.
//
// Frames (Sources/MentoryWire/Proto/mentory.proto, as captured from mentoryd):
// - Hello (Envelope field 1): the Welcome mentoryd sends, 304 bytes.
// - Request session.ping: Response{id, body: empty}.
// - Request session.subscribe: a SNAPSHOT Event, then Response{id, body}; the connection becomes
//   a subscriber of the one topic.
// - Request mentor.set (Benchmarks/loadgen/fanout.c): Response{id, body} to the publisher, and an
//   Event{topic "mentor", sequence, kind CHANGE, body, epoch} to every subscriber, its body the
//   request's body.

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

/// A connection as the shared protocol code sees it: the bytes it will send, and whether it subscribed.
protocol FloorPeer: AnyObject {
    /// What this connection will send at its next flush.
    var out: ByteBuffer { get set }
    var subscribed: Bool { get set }
    /// `subscriber`'s `out` got an event from this connection's read: it must be flushed too.
    func touched(_ subscriber: Self)
}

/// The subscribers of the one topic and its sequence number; used on the loop's thread only.
final class FloorTopic<Peer: FloorPeer> {
    var subscribers: [Peer] = []
    var sequence: UInt64 = 0
}

/// The frame splitting and answering of both floors.
enum FloorProtocol {
    /// Answers every whole frame at the front of `buffer` into `peer.out`, consuming it; a partial frame stays.
    static func answerFrames<Peer: FloorPeer>(in buffer: inout ByteBuffer, for peer: Peer, topic: FloorTopic<Peer>) {
        while let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self),
            buffer.readableBytes - 4 >= Int(length)
        {
            let start = buffer.readerIndex + 4
            Self.answer(buffer, at: start, length: Int(length), for: peer, topic: topic)
            buffer.moveReaderIndex(forwardBy: 4 + Int(length))
        }
    }

    /// Appends the reply to the frame whose payload is `buffer[start..<start+length]`.
    private static func answer<Peer: FloorPeer>(
        _ buffer: ByteBuffer, at start: Int, length: Int, for peer: Peer, topic: FloorTopic<Peer>
    ) {
        guard let tag = buffer.getInteger(at: start, as: UInt8.self) else { return }
        if tag == 0x0A {  // Envelope.hello
            peer.out.writeInteger(UInt32(Reply.welcome.count))
            peer.out.writeBytes(Reply.welcome)
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
            Self.publish(buffer, bodyAt: at, end: end, from: peer, topic: topic)
        } else if methodLength == 9 {
            body = Reply.subscribeBody
            peer.out.writeBytes(Reply.snapshot)
            if !peer.subscribed {
                peer.subscribed = true
                topic.subscribers.append(peer)
            }
        } else {
            body = Reply.pingBody
        }
        // Envelope{4: Response{1: id, 2: body}}; both lengths fit one byte here.
        let responseLength = 1 + idLength + body.count
        peer.out.writeInteger(UInt32(2 + responseLength))
        peer.out.writeInteger(UInt16(0x2200 | UInt16(responseLength)))
        peer.out.writeInteger(UInt8(0x08))
        var idBytes = buffer.getSlice(at: idStart, length: idLength)!
        peer.out.writeBuffer(&idBytes)
        peer.out.writeBytes(body)
    }

    /// Sends the request body at `buffer[at..<end]` (field 4, with key and length) as a CHANGE event to every
    /// subscriber, into each one's `out`.
    private static func publish<Peer: FloorPeer>(
        _ buffer: ByteBuffer, bodyAt at: Int, end: Int, from publisher: Peer, topic: FloorTopic<Peer>
    ) {
        guard !topic.subscribers.isEmpty else { return }
        topic.sequence += 1
        var sequence = ByteBuffer()
        Self.writeVarint(topic.sequence, into: &sequence)
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
        for subscriber in topic.subscribers {
            if subscriber !== publisher { publisher.touched(subscriber) }
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
