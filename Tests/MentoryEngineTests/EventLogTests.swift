import Foundation
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore
import Testing

@Suite("Event ring")
struct EventLogTests {
    /// A change whose body is `tag`'s bytes.
    private func change(_ tag: String) -> ProtobufBuffer {
        ProtobufBuffer(Data(tag.utf8))
    }

    /// A change of `count` zero bytes.
    private func change(zeros count: Int) -> ProtobufBuffer {
        ProtobufBuffer(Data(repeating: 0, count: count))
    }

    /// The bodies of `events`, as the tags they were published with.
    private func tags(_ events: [SharedEvent]?) -> [String]? {
        events?.map { String(decoding: $0.event.body, as: UTF8.self) }
    }

    @Test("sequence numbers start at 1 and increase by one; each change is framed as its subscribers get it")
    func sequencing() {
        var log = EventLog(topic: "mentor", capacity: 3)
        #expect(log.lastSequence == 0)
        #expect(log.firstSequence == nil)
        var a = self.change("a")
        let first = log.append(change: &a, epoch: 7)
        #expect(first.sequence == 1)
        var b = self.change("b")
        #expect(log.append(change: &b, epoch: 7).sequence == 2)
        #expect(log.events(after: 0)?.map(\.sequence) == [1, 2])
        #expect(log.events(after: 2)?.isEmpty == true)
        #expect(log.events(after: 3) == nil, "a sequence from the future cannot be resumed")

        var expected = Mentory_V1_Event()
        expected.topic = "mentor"
        expected.kind = .change
        expected.sequence = 1
        expected.body = Data("a".utf8)
        expected.epoch = 7
        #expect(first.event == expected)
        #expect(first.topic == "mentor" && first.kind == .change)
        var envelope = Mentory_V1_Envelope()
        envelope.event = expected
        var frame = ByteBuffer()
        frame.writeFrame(envelope)
        #expect(first.frame == frame, "byte for byte what SwiftProtobuf frames")
    }

    @Test("the ring keeps the newest events and refuses to resume past its start")
    func wraparound() {
        var log = EventLog(topic: "mentor", capacity: 3)
        for index in 1...7 {
            var change = self.change("e\(index)")
            _ = log.append(change: &change, epoch: 1)
        }
        #expect(log.firstSequence == 5)
        #expect(self.tags(log.events(after: 4)) == ["e5", "e6", "e7"])
        #expect(log.events(after: 5)?.map(\.sequence) == [6, 7])
        #expect(log.events(after: 3) == nil)
    }

    @Test("the ring keeps at most its bytes of events, oldest out first, and always the newest")
    func byteBound() {
        var probe = EventLog(topic: "mentor", capacity: 1)
        var probed = self.change(zeros: 1000)
        let cost = EventLog.cost(of: probe.append(change: &probed, epoch: 1))
        #expect(cost > 1000 + EventLog.overheadBytes, "an event counts its frame, headers and body")

        var log = EventLog(topic: "mentor", capacity: 100, byteCapacity: 3 * cost)
        for _ in 1...5 {
            var change = self.change(zeros: 1000)
            _ = log.append(change: &change, epoch: 1)
        }
        #expect(log.bytes == 3 * cost)
        #expect(log.firstSequence == 3)
        #expect(log.events(after: 2)?.map(\.sequence) == [3, 4, 5])
        #expect(log.events(after: 1) == nil, "an evicted event cannot be resumed from")
        var largeChange = self.change(zeros: 10_000)
        let large = log.append(change: &largeChange, epoch: 1)
        #expect(large.sequence == 6)
        #expect(log.firstSequence == 6, "an event over the bound alone is still kept")
        #expect(log.bytes == EventLog.cost(of: large))
        #expect(log.events(after: 5)?.map(\.sequence) == [6])
    }
}
