import MentoryEngine
import MentoryHandlerKit
import MentoryWire
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
}
