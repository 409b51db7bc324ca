import Foundation
import MentoryWire
import NIOCore
import Testing

@Suite("Event frames written by hand")
struct EventFrameWriterTests {
    /// The frame SwiftProtobuf writes for the envelope carrying `event`.
    private static func reference(_ event: Mentory_V1_Event) -> ByteBuffer {
        var envelope = Mentory_V1_Envelope()
        envelope.event = event
        var frame = ByteBuffer()
        frame.writeFrame(envelope)
        return frame
    }

    private static func written(_ event: Mentory_V1_Event) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.writeEventFrame(event)
        return frame
    }

    /// Edge values for each varint field: zero (left out), one byte, the boundaries of longer varints, the largest.
    private static let numbers: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, 1 << 35, UInt64(UInt32.max), .max]

    @Test("byte for byte what SwiftProtobuf writes, for every combination of edge values")
    func edgeValues() {
        let topics = ["", "t", "mentor", String(repeating: "é", count: 100), "日本"]
        let bodies = [
            Data(), Data([0]), Data(repeating: 7, count: 127), Data(repeating: 1, count: 128), Data(count: 70_000),
        ]
        let kinds: [Mentory_V1_EventKind] = [.change, .snapshot, .reset, .ended, .UNRECOGNIZED(300)]
        for topic in topics {
            for body in bodies {
                for kind in kinds {
                    for number in Self.numbers {
                        var event = Mentory_V1_Event()
                        event.topic = topic
                        event.body = body
                        event.kind = kind
                        event.sequence = number
                        event.epoch = Self.numbers[(Self.numbers.firstIndex(of: number)! + 3) % Self.numbers.count]
                        #expect(Self.written(event) == Self.reference(event), "\(event)")
                    }
                }
            }
        }
    }

    @Test("random events, seeded: the same bytes as SwiftProtobuf, and they read back as the event")
    func randomEvents() throws {
        var generator = SplitMix64(seed: 0x6d65_6e74_6f72)
        for _ in 0..<2_000 {
            var event = Mentory_V1_Event()
            let letters = (0..<Int(generator.next() % 40)).map { _ in UInt8(97 + generator.next() % 26) }
            event.topic = String(decoding: letters, as: UTF8.self)
            event.sequence = generator.next() >> (generator.next() % 64)
            event.epoch = generator.next() >> (generator.next() % 64)
            event.kind = Mentory_V1_EventKind(rawValue: Int(generator.next() % 5)) ?? .UNRECOGNIZED(4)
            let bytes = (0..<Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            event.body = Data(bytes)
            var frame = Self.written(event)
            #expect(frame == Self.reference(event))
            let payload = try #require(try LengthPrefixedFrameDecoder().nextFrame(from: &frame))
            #expect(try Mentory_V1_Envelope(frame: payload).event == event)
        }
    }

    @Test("an event with an error, unknown fields or a negative kind is left to SwiftProtobuf, with the same bytes")
    func fallback() throws {
        var withError = Mentory_V1_Event()
        withError.topic = "t"
        withError.kind = .ended
        withError.error = MentoryError.notFound("gone").wireError
        #expect(Self.written(withError) == Self.reference(withError))

        var unknown = Mentory_V1_Event()
        unknown.topic = "t"
        try unknown.merge(serializedBytes: [0x78, 0x01])  // field 15, varint 1: unknown to Event
        #expect(!unknown.unknownFields.data.isEmpty)
        #expect(Self.written(unknown) == Self.reference(unknown))

        var negative = Mentory_V1_Event()
        negative.kind = .UNRECOGNIZED(-1)
        #expect(Self.written(negative) == Self.reference(negative))
    }
}

/// A small seeded generator, so that the random cases are the same on every run.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
