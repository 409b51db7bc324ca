// The harness's view of the session: connections, their sinks, and the ids replies handed out.
//
// Harness only. `Model` and `FuzzSink` are shared between the engine's tasks and the fuzz
// callback, so their state sits behind a `Mutex` (no `@unchecked Sendable` needed).

import MentoryDomain
import MentoryEngine
import MentoryWire
import SwiftProtobuf
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

final class Model: Sendable {
    static let connectionCount = 4

    private struct State {
        var sinks: [Int: FuzzSink] = [:]
        var isShutDown = false
        var mentorItems: [String] = []
        var diary: [(id: String, items: [String])] = []
    }

    let epoch: UInt64
    private let state = Mutex(State())

    init(epoch: UInt64) {
        self.epoch = epoch
    }

    func sink(of connection: Int) -> FuzzSink? { self.state.withLock { $0.sinks[connection] } }
    func attached(_ connection: Int, sink: FuzzSink) { self.state.withLock { $0.sinks[connection] = sink } }
    func detached(_ connection: Int) { _ = self.state.withLock { $0.sinks.removeValue(forKey: connection) } }
    var isShutDown: Bool { self.state.withLock { $0.isShutDown } }
    func shutDown() { self.state.withLock { $0.isShutDown = true } }

    /// Remembers the ids a successful reply handed out, for later structured requests.
    func learn(from call: Call, reply: Data) {
        switch (call.namespace, call.method) {
        case (WireNames.mentor, _):
            guard let state = try? Mentory_V1_MentorState(serializedBytes: reply) else { return }
            self.state.withLock { $0.mentorItems = state.message.actionItems.map(\.id) }
        case (WireNames.diary, MentorySchema.Diary.add.name),
            (WireNames.diary, MentorySchema.Diary.setSuggestionDone.name):
            guard let entry = try? Mentory_V1_DiaryEntry(serializedBytes: reply) else { return }
            self.state.withLock { state in
                state.diary.removeAll { $0.id == entry.id }
                state.diary.append((entry.id, entry.actionItems.map(\.id)))
            }
        case (WireNames.diary, MentorySchema.Diary.delete.name):
            guard let entry = try? Mentory_V1_DiaryEntry(serializedBytes: reply) else { return }
            self.state.withLock { state in state.diary.removeAll { $0.id == entry.id } }
        default:
            return
        }
    }

    // MARK: Building structured requests

    private static let uuid = "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
    private static let dates = [
        "2025-01-01", "2025-01-02", "2024-02-29", "2023-02-29", "2025-13-01", "", "2025-06-15", "9999-12-31",
    ]
    private static let peers = [
        "phone", "watch", "", "a b", String(repeating: "x", count: 65), "ü-tablet", "ipad_2.0", "\u{0}",
    ]

    /// Fills in a structured request's namespace, method and body.
    func build(_ call: Call) -> Call {
        guard let built = call.built else { return call }
        var call = call
        call.built = nil
        func body(_ message: some SwiftProtobuf.Message) -> Data { message.wireBody() }
        switch built {
        case .subscribe(let mask, let resume):
            var topics = Self.topics(mask)
            if mask & 0x20 != 0, let first = topics.first { topics.append(first) }
            var request = Mentory_V1_SubscribeRequest()
            let after = UInt64(resume >> 2)
            request.topics = topics.map { topic in
                var subscription = Mentory_V1_TopicSubscription()
                subscription.topic = topic
                switch resume & 0x3 {
                case 0: break
                case 1: subscription.resumeAfter = after; subscription.epoch = self.epoch
                case 2: subscription.resumeAfter = after; subscription.epoch = self.epoch &+ 1
                default: subscription.resumeAfter = UInt64.max - after; subscription.epoch = self.epoch
                }
                return subscription
            }
            call.namespace = WireNames.session
            call.method = MentorySchema.Session.subscribe.name
            call.body = body(request)
            call.resumes = request.topics.filter { $0.hasResumeAfter && $0.epoch == self.epoch }.map {
                Resume(topic: $0.topic, after: $0.resumeAfter)
            }
        case .unsubscribe(let mask):
            var request = Mentory_V1_UnsubscribeRequest()
            request.topics = Self.topics(mask)
            call.namespace = WireNames.session
            call.method = MentorySchema.Session.unsubscribe.name
            call.body = body(request)
        case .mentorSet(let a, let b):
            var request = Mentory_V1_MentorSetRequest()
            request.content = ["Keep going.", "", "  \n", "Ünïcødé ✨"][Int(a & 0x3)]
            request.character = Mentory_V1_MentorCharacter(rawValue: Int((a >> 2) & 0x3)) ?? .unspecified
            request.actionItems = (0..<Int((a >> 4) & 0x3)).map { index in
                var item = Mentory_V1_ActionItem()
                item.id = ["", "t1", "t2", "t1"][Int((b >> (2 * index)) & 0x3)]
                item.text = index == 0 && a & 0x40 != 0 ? " " : "todo \(index)"
                item.done = a & 0x80 != 0
                return item
            }
            call.namespace = WireNames.mentor
            call.method = MentorySchema.Mentor.set.name
            call.body = body(request)
        case .mentorComplete(let pick):
            let items = self.state.withLock { $0.mentorItems }
            var request = Mentory_V1_MentorCompleteTodoRequest()
            request.id = items.isEmpty || pick & 0x80 != 0 ? "missing-\(pick)" : items[Int(pick) % items.count]
            call.namespace = WireNames.mentor
            call.method = MentorySchema.Mentor.completeTodo.name
            call.body = body(request)
        case .report(let flags):
            var request = Mentory_V1_PeerState()
            request.peer = Self.peers[Int(flags & 0x7)]
            request.isPaired = flags & 0x08 != 0
            request.isAppInstalled = flags & 0x10 != 0
            request.isReachable = flags & 0x20 != 0
            request.updatedAtUnixMs = flags & 0x40 != 0 ? -1 : 0
            call.namespace = WireNames.reachability
            call.method = MentorySchema.Reachability.report.name
            call.body = body(request)
        case .diaryAdd(let a, let b, let c):
            var request = Mentory_V1_DiaryAddRequest()
            request.recordDate = Self.dates[Int(a & 0x7)]
            request.id = ["", Self.uuid, Self.uuid.lowercased(), "not-a-uuid"][Int((a >> 3) & 0x3)]
            request.title = b & 0x01 != 0 ? "   " : "A day"
            request.text = b & 0x02 != 0 ? "" : "It happened."
            if b & 0x04 != 0 { request.analysis = "calm" }
            request.createdAtUnixMs = b & 0x08 != 0 ? 1234 : 0
            request.emotion = Mentory_V1_Emotion(rawValue: Int(c & 0xF)) ?? .unspecified
            request.actionItems = (0..<Int((c >> 4) & 0x3)).map { index in
                var item = Mentory_V1_ActionItem()
                item.id = ["", "s1", "s2", "s1"][Int((b >> (4 + 2 * index)) & 0x3)]
                item.text = a & 0x40 != 0 && index == 1 ? "\t" : "suggestion \(index)"
                return item
            }
            call.namespace = WireNames.diary
            call.method = MentorySchema.Diary.add.name
            call.body = body(request)
        case .diaryRef(let method, let entryPick, let itemPick):
            let diary = self.state.withLock { $0.diary }
            let entry = diary.isEmpty || entryPick & 0x80 != 0 ? nil : diary[Int(entryPick) % diary.count]
            let entryID = entry?.id ?? (entryPick & 0x1 == 0 ? "" : Self.uuid)
            call.namespace = WireNames.diary
            switch method % 3 {
            case 0:
                var request = Mentory_V1_DiaryGetRequest()
                request.id = entryID
                call.method = MentorySchema.Diary.get.name
                call.body = body(request)
            case 1:
                var request = Mentory_V1_DiaryDeleteRequest()
                request.id = entryID
                call.method = MentorySchema.Diary.delete.name
                call.body = body(request)
            default:
                var request = Mentory_V1_DiarySuggestionDoneRequest()
                request.entryID = entryID
                let items = entry?.items ?? []
                request.suggestionID = items.isEmpty || itemPick & 0x80 != 0 ? "s9" : items[Int(itemPick) % items.count]
                request.done = itemPick & 0x40 == 0
                call.method = MentorySchema.Diary.setSuggestionDone.name
                call.body = body(request)
            }
        case .diaryList(let limit, let before):
            var request = Mentory_V1_DiaryListRequest()
            request.limit = [0, 1, 2, 3, 50, 1000, 1001, UInt32.max][Int(limit & 0x7)]
            let befores: [String?] = [
                nil, "2025-01-02", "2025-06-15", "0000-00-00", "2025-1-1", "", "9999-12-31", "2024-02-29",
            ]
            if let value = befores[Int(before & 0x7)] { request.before = value }
            call.namespace = WireNames.diary
            call.method = MentorySchema.Diary.list.name
            call.body = body(request)
        }
        return call
    }

    /// Topic names from a bit mask: bits 0-2 the real topics, bit 3 an unknown one, bit 4 reversed.
    private static func topics(_ mask: UInt8) -> [String] {
        var topics = topicNames.indices.filter { mask & (1 << $0) != 0 }.map { topicNames[$0] }
        if mask & 0x08 != 0 { topics.append("nope") }
        if mask & 0x10 != 0 { topics.reverse() }
        return topics
    }
}

/// A subscriber that checks every event it accepts and can pretend its queue is full.
final class FuzzSink: EventSink {
    /// Responses of suspended requests are read from their task (`MentoryEngine.respond(to:from:)`).
    func answer(_ response: consuming OutboundResponse) {}

    private struct Track {
        /// The sequence number of the last event seen, or `nil` before any.
        var last: UInt64?
    }

    private struct State {
        var accepting = true
        var tracks: [String: Track] = [:]
        /// Positions subscribe requests asked to resume from: a replay may start right after any of
        /// them. An entry is used up by the replay; one the engine did not use (it sent a reset, or
        /// there was nothing to replay) stays, which only ever lets through a jump to that exact point.
        var resumes: [Resume] = []
    }

    private let epoch: UInt64
    private let state = Mutex(State())

    init(epoch: UInt64) {
        self.epoch = epoch
    }

    func setAccepting(_ accepting: Bool) { self.state.withLock { $0.accepting = accepting } }
    func expectResumes(_ resumes: [Resume]) { self.state.withLock { $0.resumes += resumes } }

    func deliver(_ shared: SharedEvent) -> Bool {
        let event = shared.event
        return self.state.withLock { state in
            guard state.accepting else { return false }
            self.check(event)
            var track = state.tracks[event.topic, default: Track()]
            switch event.kind {
            case .snapshot, .reset:
                track.last = event.sequence
            case .change:
                if let last = track.last, event.sequence != last &+ 1 {
                    let resume = Resume(topic: event.topic, after: event.sequence &- 1)
                    guard let index = state.resumes.firstIndex(of: resume) else {
                        fail("\(event.topic) change #\(event.sequence) follows #\(last): events lost or repeated")
                    }
                    state.resumes.remove(at: index)
                }
                track.last = event.sequence
            case .ended:
                // The daemon ended the subscription (its subscriber lost the right to read the topic): nothing more
                // follows on it, and a new subscription starts with a snapshot.
                track.last = nil
            case .UNRECOGNIZED(let kind):
                fail("an event of unknown kind \(kind)")
            }
            state.tracks[event.topic] = track
            return true
        }
    }

    /// An event's epoch and body must match its topic and kind.
    private func check(_ event: Mentory_V1_Event) {
        guard event.epoch == self.epoch else { fail("event epoch \(event.epoch), engine epoch \(self.epoch)") }
        func decode<M: SwiftProtobuf.Message>(_ type: M.Type) -> M {
            guard let message = try? M(serializedBytes: event.body) else {
                fail("a \(event.kind) event on \(event.topic) does not hold a \(M.protoMessageName)")
            }
            return message
        }
        let isState = event.kind != .change
        switch event.topic {
        case WireNames.mentor:
            _ = decode(Mentory_V1_MentorState.self)
        case WireNames.reachability where isState:
            _ = decode(Mentory_V1_ReachabilitySnapshot.self)
        case WireNames.reachability:
            guard !decode(Mentory_V1_PeerState.self).peer.isEmpty else { fail("a reachability change without a peer") }
        case WireNames.diary where isState:
            let dates = decode(Mentory_V1_DiarySnapshot.self).entries.map(\.recordDate)
            guard dates == dates.sorted(by: >) else { fail("a diary snapshot out of order: \(dates)") }
        case WireNames.diary:
            guard decode(Mentory_V1_DiaryChange.self).change != nil else { fail("a diary change without a change") }
        default:
            fail("an event on unknown topic '\(event.topic)'")
        }
    }
}
