import Foundation
import MentoryWire
import NIOCore
import SwiftProtobuf
import Testing

@Suite("Protobuf bytes in a ByteBuffer")
struct ProtobufBufferTests {
    static let ids: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, UInt64(UInt32.max), .max]
    static let bodyLengths = [0, 1, 127, 128, 300, 16_384, 2_097_152]

    @Test("a response frame written into the headroom is byte for byte what SwiftProtobuf writes", arguments: ids)
    func responseFrame(_ id: UInt64) throws {
        for length in Self.bodyLengths {
            let reply = Google_Protobuf_BytesValue(Data((0..<length).map { UInt8(truncatingIfNeeded: $0) }))
            let body: ProtobufBuffer = try reply.serializedBytes()
            #expect(body.count == (try reply.serializedBytes() as [UInt8]).count)
            var envelope = Mentory_V1_Envelope()
            envelope.response = .success(id: id, body: try reply.serializedData())
            var expected = ByteBuffer()
            expected.writeFrame(envelope)
            let payloadLength = body.responsePayloadLength(id: id)
            let storage = body.buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
            let bodyCount = body.count
            let frame = (consume body).responseFrame(id: id)
            #expect(frame == expected, "id \(id), body of \(length) bytes")
            #expect(payloadLength == expected.readableBytes - WireProtocol.lengthPrefixSize)
            // Written in place: the frame's body is where the message was serialized.
            let frameBody = frame.withUnsafeReadableBytes {
                UInt(bitPattern: $0.baseAddress) + UInt(frame.readableBytes - bodyCount)
            }
            #expect(frameBody == storage, "id \(id), body of \(length) bytes was copied")
        }
    }

    @Test("bytes without headroom are copied once into a frame that is still correct")
    func withoutHeadroom() {
        let body = ProtobufBuffer(ByteBuffer(bytes: [0x08, 0x01]))
        var envelope = Mentory_V1_Envelope()
        envelope.response = .success(id: 9, body: Data([0x08, 0x01]))
        var expected = ByteBuffer()
        expected.writeFrame(envelope)
        #expect(body.responseFrame(id: 9) == expected)
    }

    @Test("a response frame appended to other frames is byte for byte what SwiftProtobuf writes", arguments: ids)
    func appendedResponseFrame(_ id: UInt64) throws {
        var frames = ByteBuffer(bytes: [0xAA, 0xBB])
        var expected = frames
        for length in Self.bodyLengths {
            let reply = Google_Protobuf_BytesValue(Data((0..<length).map { UInt8(truncatingIfNeeded: $0) }))
            let body: ProtobufBuffer = try reply.serializedBytes()
            var envelope = Mentory_V1_Envelope()
            envelope.response = .success(id: id, body: try reply.serializedData())
            let before = expected.readableBytes
            expected.writeFrame(envelope)
            let written = body.writeResponseFrame(id: id, into: &frames)
            #expect(written == expected.readableBytes - before, "id \(id), body of \(length) bytes")
            #expect(written == WireProtocol.lengthPrefixSize + body.responsePayloadLength(id: id))
        }
        #expect(frames == expected)
    }

    @Test("the shared empty body frames as an empty reply and is never written into")
    func sharedEmptyBody() {
        var envelope = Mentory_V1_Envelope()
        envelope.response = .success(id: 7, body: Data())
        var expected = ByteBuffer()
        expected.writeFrame(envelope)
        var frames = ByteBuffer()
        ProtobufBuffer.empty.writeResponseFrame(id: 7, into: &frames)
        #expect(frames == expected)
        #expect(ProtobufBuffer.empty.responseFrame(id: 7) == expected)
        // Framing copied it rather than writing headers in front of the shared bytes.
        #expect(ProtobufBuffer.empty.buffer.readerIndex == 0)
        #expect(ProtobufBuffer.empty.count == 0)
    }

    @Test("a body another holder shares is copied into its frame, never written into in front")
    func sharedBodyIsCopied() throws {
        let reply = Google_Protobuf_StringValue("kept by a handler and sent twice")
        let body: ProtobufBuffer = try reply.serializedBytes()
        let kept = body
        let headroom = { kept.buffer.withVeryUnsafeBytes { Array($0.prefix(ProtobufBuffer.headroom)) } }
        let headroomBefore = headroom()
        let keptStart = kept.buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        for id: UInt64 in [3, 300] {
            var envelope = Mentory_V1_Envelope()
            envelope.response = .success(id: id, body: try reply.serializedData())
            var expected = ByteBuffer()
            expected.writeFrame(envelope)
            let frame = body.responseFrame(id: id)
            #expect(frame == expected, "id \(id)")
            let frameBodyStart = frame.withUnsafeReadableBytes {
                UInt(bitPattern: $0.baseAddress) + UInt(frame.readableBytes - kept.count)
            }
            #expect(frameBodyStart != keptStart, "framed in a buffer of its own")
        }
        #expect(headroom() == headroomBefore, "no headers were written in front of the shared bytes")
    }

    @Test(
        "a change event is framed where its body was serialized, byte for byte what SwiftProtobuf writes",
        arguments: [(UInt64(1), UInt64(0)), (300, 7), (.max, .max)])
    func changeEventInPlace(_ sequence: UInt64, _ epoch: UInt64) throws {
        for length in [0, 1, 200, 70_000] {
            let change = Google_Protobuf_BytesValue(Data(repeating: 5, count: length))
            var body: ProtobufBuffer = try change.serializedBytes()
            let bodyBytes = body.count
            let bodyStart = body.buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
            let framed = body.changeEventFrame(topic: "mentor", sequence: sequence, epoch: epoch)
            let frame = try #require(framed)
            var event = Mentory_V1_Event()
            event.topic = "mentor"
            event.sequence = sequence
            event.kind = .change
            event.body = try change.serializedData()
            event.epoch = epoch
            var envelope = Mentory_V1_Envelope()
            envelope.event = event
            var expected = ByteBuffer()
            expected.writeFrame(envelope)
            #expect(frame == expected, "body of \(length) bytes")
            // The body is where it was, and is still the change's bytes, now sharing the frame's storage.
            #expect(body.count == bodyBytes)
            #expect(body.buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } == bodyStart)
            #expect(try Google_Protobuf_BytesValue(serializedBytes: body) == change)
        }
    }

    @Test("a change event is not framed in place in shared storage, or for a topic longer than the room in front")
    func changeEventNotInPlace() throws {
        var shared: ProtobufBuffer = try Google_Protobuf_StringValue("kept").serializedBytes()
        let other = shared
        #expect(shared.changeEventFrame(topic: "mentor", sequence: 1, epoch: 1) == nil)
        #expect(other.count == shared.count)
        var long: ProtobufBuffer = try Google_Protobuf_StringValue("x").serializedBytes()
        let topic = String(repeating: "t", count: ProtobufBuffer.headroom)
        #expect(long.changeEventFrame(topic: topic, sequence: 1, epoch: 1) == nil)
        var empty = ProtobufBuffer.empty
        #expect(empty.changeEventFrame(topic: "mentor", sequence: 1, epoch: 1) == nil)
    }

    @Test("a message decodes from a slice of a buffer and round-trips")
    func decode() throws {
        var message = Mentory_V1_Hello()
        message.protocolVersion = 3
        message.clientName = "bytes"
        let bytes: ProtobufBuffer = try message.serializedBytes()
        var buffer = ByteBuffer(bytes: [1, 2, 3])
        buffer.writeImmutableBuffer(bytes.buffer)
        buffer.moveReaderIndex(forwardBy: 3)
        #expect(try Mentory_V1_Hello(serializedBytes: ProtobufBuffer(buffer)) == message)
        #expect(ProtobufBuffer([1, 2, 3]).count == 3)
        #expect(
            ProtobufBuffer(repeating: 4, count: 5).buffer.readableBytesView.elementsEqual(repeatElement(4, count: 5)))
    }
}
