import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import Foundation
import Testing

@Suite("Event ring")
struct EventLogTests {
    private func event(_ tag: String) -> Mentory_V1_Event {
        var event = Mentory_V1_Event()
        event.topic = tag
        return event
    }

    @Test("sequence numbers start at 1 and increase by one")
    func sequencing() {
        var log = EventLog(capacity: 3)
        #expect(log.lastSequence == 0)
        #expect(log.firstSequence == nil)
        #expect(log.append(self.event("a")).sequence == 1)
        #expect(log.append(self.event("b")).sequence == 2)
        #expect(log.events(after: 0)?.map(\.sequence) == [1, 2])
        #expect(log.events(after: 2) == [])
        #expect(log.events(after: 3) == nil, "a sequence from the future cannot be resumed")
    }

    @Test("the ring keeps the newest events and refuses to resume past its start")
    func wraparound() {
        var log = EventLog(capacity: 3)
        for index in 1...7 {
            _ = log.append(self.event("e\(index)"))
        }
        #expect(log.firstSequence == 5)
        #expect(log.events(after: 4)?.map(\.topic) == ["e5", "e6", "e7"])
        #expect(log.events(after: 5)?.map(\.sequence) == [6, 7])
        #expect(log.events(after: 3) == nil)
    }

    @Test("the ring keeps at most its bytes of events, oldest out first, and always the newest")
    func byteBound() {
        let overhead = EventLog.overheadBytes
        var log = EventLog(capacity: 100, byteCapacity: 3 * (1000 + overhead))
        for index in 1...5 {
            var event = self.event("e\(index)")
            event.body = Data(repeating: 0, count: 1000)
            _ = log.append(event)
        }
        #expect(log.bytes == 3 * (1000 + overhead))
        #expect(log.firstSequence == 3)
        #expect(log.events(after: 2)?.map(\.topic) == ["e3", "e4", "e5"])
        #expect(log.events(after: 1) == nil, "an evicted event cannot be resumed from")
        var large = self.event("large")
        large.body = Data(repeating: 0, count: 10_000)
        #expect(log.append(large).sequence == 6)
        #expect(log.firstSequence == 6, "an event over the bound alone is still kept")
        #expect(log.bytes == 10_000 + overhead)
        #expect(log.events(after: 5)?.map(\.topic) == ["large"])
    }
}
