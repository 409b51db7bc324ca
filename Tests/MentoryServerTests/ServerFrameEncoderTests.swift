import Foundation
import MentoryWire
import NIOCore
import SwiftProtobuf
import Testing

@testable import MentoryServer

/// A reply framed in place must come out as the envelope encoder frames it, and be refused at the same sizes.
@Suite("Responses framed in place")
struct ServerFrameEncoderTests {
    /// What the envelope encoder makes of `response`: the frame, or the refusal's (length, maximum).
    static func reference(_ response: Mentory_V1_Response, maxFrameLength: Int) -> Result<ByteBuffer, Refusal> {
        var envelope = Mentory_V1_Envelope()
        envelope.response = response
        return ServerFrameEncoder.encode(envelope, maxFrameLength: maxFrameLength).mapError(Refusal.init)
    }

    struct Refusal: Error, Equatable {
        var length: Int
        var maximum: Int
        init(_ oversized: OversizedFrame) {
            self.length = oversized.length
            self.maximum = oversized.maximum
        }
    }

    static func reply(_ length: Int) -> ProtobufBuffer {
        // BytesValue: 1 tag byte and the length's varint, then the bytes.
        (try? Google_Protobuf_BytesValue(Data(repeating: 0xAB, count: length)).serializedBytes()) ?? .init([])
    }

    @Test("a reply's frame is the envelope encoder's, written around the serialized reply without copying it")
    func inPlace() {
        for id: UInt64 in [0, 1, 200, .max] {
            for length in [0, 1, 126, 127, 128, 5_000, 70_000] {
                var response = OutboundResponse.success(id: id, body: Self.reply(length))
                let expected = Self.reference(response.wireResponse, maxFrameLength: 1 << 20)
                let storage = response.body!.buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
                let bodyLength = response.bodyLength
                let frame = ServerFrameEncoder.encode(&response, maxFrameLength: 1 << 20).mapError(Refusal.init)
                #expect(frame == expected, "id \(id), reply of \(length) bytes")
                guard case .success(let frame) = frame else { continue }
                let framed = frame.withUnsafeReadableBytes {
                    UInt(bitPattern: $0.baseAddress) + UInt(frame.readableBytes - bodyLength)
                }
                #expect(framed == storage, "id \(id), reply of \(length) bytes: the body was copied")
            }
        }
    }

    @Test("an error response is framed as before")
    func error() {
        var response = OutboundResponse.failure(id: 4, error: MentoryError.notFound("no such entry").wireError)
        let expected = Self.reference(response.wireResponse, maxFrameLength: 4096)
        #expect(ServerFrameEncoder.encode(&response, maxFrameLength: 4096).mapError(Refusal.init) == expected)
    }

    @Test("a reply over the frame limit is refused with the figures the envelope encoder gives, at every edge")
    func limit() {
        for length in [90, 100, 126, 127, 128, 200] {
            for maxFrameLength in 95...135 {
                var response = OutboundResponse.success(id: 300, body: Self.reply(length))
                let expected = Self.reference(response.wireResponse, maxFrameLength: maxFrameLength)
                let actual = ServerFrameEncoder.encode(&response, maxFrameLength: maxFrameLength).mapError(
                    Refusal.init)
                #expect(actual == expected, "reply of \(length) bytes, limit \(maxFrameLength)")
            }
        }
    }
}
