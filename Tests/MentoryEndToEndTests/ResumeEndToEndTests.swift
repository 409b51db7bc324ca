import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import Synchronization
import Testing

/// A subscriber's picture of the daemon, rebuilt only from events.
private struct SubscriberModel {
    var mentor = Mentory_V1_MentorState()
    var diary: [String: Mentory_V1_DiaryEntry] = [:]
    var cursors: [String: TopicCursor] = [:]
    var changesSeen = 0
    var resets = 0

    /// Applies one event, checking order: changes continue the sequence exactly; snapshots and resets never go back.
    mutating func apply(_ event: Mentory_V1_Event) throws {
        let previous = self.cursors[event.topic]
        switch event.kind {
        case .change:
            if let previous, previous.epoch == event.epoch {
                #expect(
                    event.sequence == previous.sequence + 1,
                    "topic \(event.topic): \(previous.sequence) then \(event.sequence)")
            } else {
                Issue.record("a change on \(event.topic) arrived before any snapshot or reset")
            }
            self.changesSeen += 1
            switch event.topic {
            case WireNames.mentor:
                self.mentor = try Mentory_V1_MentorState(serializedBytes: event.body)
            case WireNames.diary:
                switch try Mentory_V1_DiaryChange(serializedBytes: event.body).change {
                case .added(let entry), .updated(let entry): self.diary[entry.id] = entry
                case .deletedID(let id): self.diary[id] = nil
                case nil: Issue.record("an empty diary change")
                }
            default:
                break
            }
        case .snapshot, .reset:
            if event.kind == .reset { self.resets += 1 }
            if let previous, previous.epoch == event.epoch {
                #expect(event.sequence >= previous.sequence, "a reset never goes back in time")
            }
            switch event.topic {
            case WireNames.mentor:
                self.mentor = try Mentory_V1_MentorState(serializedBytes: event.body)
            case WireNames.diary:
                let snapshot = try Mentory_V1_DiarySnapshot(serializedBytes: event.body)
                self.diary = Dictionary(uniqueKeysWithValues: snapshot.entries.map { ($0.id, $0) })
            default:
                break
            }
        case .ended:
            Issue.record("the subscription to \(event.topic) ended: \(event.error.message)")
        case .UNRECOGNIZED:
            Issue.record("unknown event kind")
        }
        self.cursors[event.topic] = TopicCursor(epoch: event.epoch, sequence: event.sequence)
    }
}

@Suite("Resuming subscribers", .serialized, .timeLimit(.minutes(10)))
struct ResumeEndToEndTests {
    @Test("a subscriber disconnected at random moments during 100,000 changes ends with exactly the final state")
    func randomDisconnects() async throws {
        // A small ring, so that some gaps are too long to replay and must be covered by resets.
        // The events, not the disk, are under test here: the store is the in-memory one.
        let ringCapacity: UInt64 = 64
        let daemon = try await DaemonProcess(environment: [
            "MENTORYD_EVENTS_RING_CAPACITY": "\(ringCapacity)", "MENTORYD_STORAGE_BACKEND": "memory",
        ])
        defer { daemon.removeFiles() }
        let topics = [WireNames.mentor, WireNames.diary]
        // ThreadSanitizer slows the daemon and this process about tenfold: 20,000 changes there still cut
        // the subscriber off hundreds of times and overrun the ring, within the suite's time limit.
        let totalChanges = Sanitizers.threadSanitizerIsActive ? 20_000 : 100_000
        let writers = 8

        // Writers: mentor sets, diary adds and deletes (the diary stays small).
        let writersDone = DoneFlag()
        let writing = Task {
            defer { writersDone.set() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        let client = try await daemon.client("writer-\(writer)")
                        let perWriter = totalChanges / writers
                        var index = 0
                        while index < perWriter {
                            if index % 2 == 0 {
                                var set = Mentory_V1_MentorSetRequest()
                                set.content = "writer \(writer) change \(index)"
                                set.character = index % 4 == 0 ? .cool : .warm
                                _ = try await client.mentorSet(set)
                                index += 1
                            } else {
                                // An add and its delete: two changes. Each writer owns its own days.
                                let dayNumber = writer * perWriter + index
                                var add = Mentory_V1_DiaryAddRequest()
                                add.recordDate = String(
                                    format: "%04d-%02d-%02d", 1000 + dayNumber / 336, 1 + (dayNumber / 28) % 12,
                                    1 + dayNumber % 28)
                                add.title = "entry \(dayNumber)"
                                add.text = "text"
                                add.emotion = .neutral
                                let entry = try await client.diaryAdd(add)
                                if index + 1 < perWriter, index % 10 != 1 {
                                    try await client.diaryDelete(id: entry.id)
                                    index += 2
                                } else {
                                    index += 1
                                }
                            }
                        }
                        await client.close()
                    }
                }
                try await group.waitForAll()
            }
        }

        var model = SubscriberModel()
        var sessions = 0
        /// One subscriber connection: resumes from the model's cursors, then consumes events until
        /// it is cut off after `lifetime` (a random moment), or until it has caught up with `target`.
        func session(lifetime: Duration?, until target: [String: UInt64] = [:]) async throws {
            if lifetime == nil, target.allSatisfy({ model.cursors[$0.key]?.sequence == $0.value }) { return }
            sessions += 1
            let client = try await daemon.client("subscriber")
            _ = try await client.subscribe(
                topics.map { topic in
                    var subscription = Mentory_V1_TopicSubscription()
                    subscription.topic = topic
                    if let cursor = model.cursors[topic] {
                        subscription.resumeAfter = cursor.sequence
                        subscription.epoch = cursor.epoch
                    }
                    return subscription
                }
            )
            let cutOff = Task {
                if let lifetime {
                    try? await Task.sleep(for: lifetime)
                    await client.close()
                }
            }
            for await event in client.events {
                try model.apply(event)
                // A diary snapshot holds the newest entries; the older ones are paged with `list`.
                if event.topic == WireNames.diary, event.kind != .change,
                    let snapshot = try? Mentory_V1_DiarySnapshot(serializedBytes: event.body), snapshot.hasNextBefore
                {
                    do {
                        for entry in try await client.diaryListAll(before: snapshot.nextBefore) {
                            model.diary[entry.id] = entry
                        }
                    } catch {
                        // Cut off mid-way: the next session starts over with a fresh snapshot.
                        model.cursors[WireNames.diary] = nil
                        break
                    }
                }
                if lifetime == nil, target.allSatisfy({ model.cursors[$0.key]?.sequence == $0.value }) {
                    break
                }
            }
            cutOff.cancel()
            await client.close()
        }

        /// Waits (bounded) until some topic has moved more than the ring holds past the subscriber's
        /// cursor, so that the next session cannot replay it and must get a reset.
        let observer = try await daemon.client("observer")
        func outrunTheRing() async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while !writersDone.isSet, ContinuousClock.now < deadline {
                let published = try await observer.status().topics
                if published.contains(where: { $0.sequence > (model.cursors[$0.topic]?.sequence ?? 0) + ringCapacity })
                {
                    return
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        }

        let started = ContinuousClock.now
        while !writersDone.isSet {
            try await session(lifetime: .milliseconds(Int.random(in: 1...200)))
            if sessions.isMultiple(of: 8) {
                try await outrunTheRing()
            } else {
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...50)))
            }
        }
        await observer.close()
        try await writing.value
        let verifier = try await daemon.client("verifier")
        let final = try await verifier.status().topics.filter { topics.contains($0.topic) }
        let writingTime = ContinuousClock.now - started
        try await session(lifetime: nil, until: Dictionary(uniqueKeysWithValues: final.map { ($0.topic, $0.sequence) }))

        // The model built from events equals the daemon's state.
        #expect(model.mentor == (try await verifier.mentorGet()))
        var stored: [Mentory_V1_DiaryEntry] = []
        var before: String?
        while true {
            let page = try await verifier.diaryList(limit: 1000, before: before)
            stored += page
            guard page.count == 1000 else { break }
            before = page.last?.recordDate
        }
        #expect(model.diary == Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) }))
        let status = try await verifier.status()
        let published = status.topics.filter { topics.contains($0.topic) }.reduce(0) { $0 + Int($1.sequence) }
        #expect(published == totalChanges)
        #expect(model.resets > 0, "with a 64-event ring some gaps must have been covered by resets")
        print(
            "resume test: \(published) changes in \(writingTime), \(sessions) subscriber sessions, \(model.changesSeen) changes seen, \(model.resets) resets"
        )
        await verifier.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("mentoryctl watch survives a daemon restart and resumes with a reset")
    func watchAcrossRestart() async throws {
        let first = try await DaemonProcess()
        defer { first.removeFiles() }
        let writer = try await first.client()
        var set = Mentory_V1_MentorSetRequest()
        set.content = "before restart"
        set.character = .warm
        _ = try await writer.mentorSet(set)
        await writer.close()

        let watch = Process()
        watch.executableURL = DaemonProcess.binary("mentoryctl")
        watch.arguments = ["watch", "mentor", "--json", "--count", "3", "--socket", first.socketPath]
        let output = Pipe()
        watch.standardOutput = output
        watch.standardError = FileHandle.nullDevice
        try await watch.runTiedToTestProcess()
        let lines = LineReader(output.fileHandleForReading)
        let snapshot = try #require(await lines.next())
        #expect(snapshot.contains(#""kind":"snapshot""#))
        #expect(snapshot.contains("before restart"))

        #expect(await first.stop() == 0)
        let second = try await DaemonProcess(socketPath: first.socketPath)
        let reset = try #require(await lines.next())
        #expect(reset.contains(#""kind":"reset""#), "a new epoch cannot replay: \(reset)")
        let client = try await second.client()
        set.content = "after restart"
        _ = try await client.mentorSet(set)
        let change = try #require(await lines.next())
        #expect(change.contains(#""kind":"change""#))
        #expect(change.contains("after restart"))
        _ = await watch.waitForExit()
        #expect(watch.terminationStatus == 0)
        await client.close()
        await second.stop()
    }

    @Test("a cancelled call returns at once and the client stays usable")
    func cancellation() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        let call = Task {
            try await client.call(WireNames.session, "subscribe", body: Data([0x0A, 0x00]), timeout: .seconds(30))
        }
        call.cancel()
        _ = await call.result
        try await client.ping()
        await client.close()
        await daemon.stop()
    }
}

/// A one-way flag shared between tasks.
private final class DoneFlag: Sendable {
    private let done = Atomic<Bool>(false)
    func set() { self.done.store(true, ordering: .releasing) }
    var isSet: Bool { self.done.load(ordering: .acquiring) }
}

/// Reads lines from a pipe as they come, bounded by a timeout per line.
private final class LineReader: Sendable {
    private let stream: AsyncStream<String>

    init(_ handle: FileHandle) {
        self.stream = AsyncStream { continuation in
            Thread {
                var buffer = Data()
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                    while let newline = buffer.firstIndex(of: 0x0A) {
                        continuation.yield(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                        buffer.removeSubrange(buffer.startIndex...newline)
                    }
                }
                continuation.finish()
            }.start()
        }
    }

    func next(timeout: Duration = .seconds(20)) async -> String? {
        await withTaskGroup(of: String?.self) { group in
            group.addTask {
                var iterator = self.stream.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
    }
}
