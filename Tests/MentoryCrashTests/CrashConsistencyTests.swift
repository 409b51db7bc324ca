import Foundation
import MentoryClient
import MentoryDomain
import MentoryWire
import Testing

@testable import mentoryctl

/// What the clients saw acknowledged, and what went wrong unexpectedly.
actor Ledger {
    private(set) var acknowledged: [Mentory_V1_DiaryEntry] = []
    private(set) var unexpected: [String] = []
    private(set) var unacknowledgedAttempts = 0
    private(set) var isStopped = false

    func record(_ entry: Mentory_V1_DiaryEntry) { self.acknowledged.append(entry) }
    func recordUnexpected(_ problem: String) { self.unexpected.append(problem) }
    func recordLostConnection() { self.unacknowledgedAttempts += 1 }
    func stop() { self.isStopped = true }
    var count: Int { self.acknowledged.count }
}

@Suite("mentoryd against SIGKILL and restarts", .serialized, .timeLimit(.minutes(10)))
struct CrashConsistencyTests {
    static let clients = 8
    static let kills = 5
    /// How long the writers may go without 20 acknowledgments before the daemon counts as stuck.
    static let progressTimeout = Duration.seconds(120)
    /// How long one connect or one write may take before a writer gives up on its connection.
    static let callDeadline = Duration.seconds(30)

    @Test("every entry acknowledged before a SIGKILL is there afterwards, identical")
    func acknowledgedEntriesSurviveSIGKILL() async throws {
        try await withScratchDirectory { directory in
            let socket = directory + "/mentoryd.sock"
            let state = directory + "/state"
            let log = directory + "/mentoryd.log"
            let ledger = Ledger()
            var daemon = try await DaemonProcess.start(socketPath: socket, stateDirectory: state, logPath: log)

            let writers = Task {
                await withTaskGroup(of: Void.self) { group in
                    for client in 0..<Self.clients {
                        group.addTask {
                            await Self.writeAsFastAsPossible(client: client, socket: socket, ledger: ledger)
                        }
                    }
                }
            }

            var killed = 0
            do {
                for _ in 0..<Self.kills {
                    // Kill at a random moment while acknowledged writes are flowing.
                    try await Self.waitForProgress(ledger, daemon: daemon)
                    try await Task.sleep(for: .milliseconds(Int.random(in: 0...400)))
                    await daemon.stop(with: SIGKILL)
                    #expect(daemon.terminationReason == .uncaughtSignal)
                    killed += 1
                    daemon = try await DaemonProcess.start(socketPath: socket, stateDirectory: state, logPath: log)
                }
                // Let the clients write a little on the last run, then stop them.
                try await Self.waitForProgress(ledger, daemon: daemon)
            } catch {
                await ledger.stop()
                await daemon.stop(with: SIGKILL)
                throw error
            }
            await ledger.stop()
            await writers.value

            // Every acknowledged entry must be there, identical.
            let verifier = try await MentoryClient.connect(socketPath: socket, clientName: "verifier")
            let acknowledged = await ledger.acknowledged
            var lost: [String] = []
            var changed: [String] = []
            for entry in acknowledged {
                do {
                    let stored = try await verifier.diaryGet(id: entry.id)
                    if stored != entry { changed.append(entry.id) }
                } catch let error as MentoryClientError where error.remoteCode == .notFound {
                    lost.append(entry.id)
                }
            }
            let listed = try await Self.listAll(verifier)
            await verifier.close()
            let exitStatus = await daemon.stop(with: SIGTERM)

            let unexpected = await ledger.unexpected
            let attempts = await ledger.unacknowledgedAttempts
            print(
                "crash consistency: \(Self.clients) clients, \(killed) SIGKILLs; \(acknowledged.count) acknowledged "
                    + "entries checked, \(lost.count) lost, \(changed.count) changed; \(listed.count) entries stored "
                    + "(\(listed.count - acknowledged.count) committed but unacknowledged when killed, "
                    + "\(attempts) calls cut off)"
            )
            #expect(acknowledged.count >= (killed + 1) * 20)
            #expect(lost.isEmpty, "lost acknowledged entries: \(lost.prefix(10))")
            #expect(changed.isEmpty, "changed acknowledged entries: \(changed.prefix(10))")
            #expect(Set(listed.map(\.id)).isSuperset(of: acknowledged.map(\.id)))
            #expect(unexpected.isEmpty, "unexpected errors: \(unexpected.prefix(10))")
            #expect(exitStatus == 0, "mentoryd exited with \(exitStatus):\n\(daemon.logTail())")
        }
    }

    /// Waits until the clients got 20 more acknowledgments (the daemon is serving writes).
    ///
    /// The bound only catches a daemon that stopped serving: under ThreadSanitizer, with both cores
    /// busy, a restarted daemon and eight reconnecting writers can take far longer than usual, and
    /// the wait returns as soon as the writes flow.
    static func waitForProgress(_ ledger: Ledger, daemon: DaemonProcess) async throws {
        let before = await ledger.count
        let deadline = ContinuousClock.now + Self.progressTimeout
        while await ledger.count < before + 20 {
            guard ContinuousClock.now < deadline else {
                throw CrashTestError(
                    "fewer than 20 acknowledged writes in \(Self.progressTimeout); mentoryd log:\n\(daemon.logTail())")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// One client: adds entries with distinct days until stopped, reconnecting whenever the daemon dies.
    static func writeAsFastAsPossible(client: Int, socket: String, ledger: Ledger) async {
        var connection: MentoryClient?
        var next = client
        while await !ledger.isStopped {
            if connection == nil {
                connection = try? await withDeadline(Self.callDeadline) {
                    try await MentoryClient.connect(
                        socketPath: socket,
                        clientName: "crash-writer-\(client)",
                        defaultTimeout: Self.callDeadline
                    )
                }
                if connection == nil {
                    try? await Task.sleep(for: .milliseconds(5))
                    continue
                }
            }
            let request = addRequest(next, client: client)
            next += Self.clients
            let current = connection!
            do {
                let entry = try await withDeadline(Self.callDeadline) { try await current.diaryAdd(request) }
                if entry.recordDate != request.recordDate || entry.title != request.title || entry.text != request.text
                    || entry.actionItems != request.actionItems
                {
                    await ledger.recordUnexpected("entry \(entry.id) came back different from its request")
                }
                await ledger.record(entry)
            } catch {
                switch error {
                case is DeadlineExceeded:
                    await ledger.recordLostConnection()
                case let error as MentoryClientError:
                    switch error {
                    case .connectionClosed, .cannotConnect, .timedOut:
                        await ledger.recordLostConnection()
                    case .remote where error.remoteCode == .shuttingDown:
                        await ledger.recordLostConnection()
                    default:
                        await ledger.recordUnexpected("\(error)")
                    }
                default:
                    await ledger.recordUnexpected("\(error)")
                }
                await connection?.close()
                connection = nil
            }
        }
        await connection?.close()
    }

    /// Every stored entry, paging through `diary list`.
    static func listAll(_ client: MentoryClient) async throws -> [Mentory_V1_DiaryEntry] {
        var all: [Mentory_V1_DiaryEntry] = []
        var before: String?
        while true {
            let page = try await client.diaryList(limit: 1000, before: before)
            all += page
            guard page.count == 1000, let last = page.last else { return all }
            before = last.recordDate
        }
    }

    @Test("after a clean SIGTERM restart, the mentor state and the entries come back identical")
    func restartKeepsState() async throws {
        try await withScratchDirectory { directory in
            let socket = directory + "/mentoryd.sock"
            let state = directory + "/state"
            let log = directory + "/mentoryd.log"
            var daemon = try await DaemonProcess.start(socketPath: socket, stateDirectory: state, logPath: log)

            var client = try await MentoryClient.connect(socketPath: socket, clientName: "restart-test")
            var set = Mentory_V1_MentorSetRequest()
            set.content = "Write three lines tonight."
            set.character = .cool
            set.actionItems = ["Open the diary", "Write", "Close it"].map { text in
                var item = Mentory_V1_ActionItem()
                item.text = text
                return item
            }
            let initialMentor = try await client.mentorSet(set)
            let mentor = try await client.mentorCompleteTodo(id: initialMentor.message.actionItems[1].id)
            var ids: [String] = []
            for index in 0..<12 {
                ids.append(try await client.diaryAdd(addRequest(index * 4 + 3, client: 0)).id)
            }
            _ = try await client.diarySetSuggestionDone(entryID: ids[2], suggestionID: "c0-e11-i0", done: true)
            _ = try await client.diarySetSuggestionDone(entryID: ids[2], suggestionID: "c0-e11-i1", done: false)
            try await client.diaryDelete(id: ids[5])
            let entries = try await client.diaryList(limit: 1000)
            #expect(entries.count == 11)
            #expect(try await client.mentorGet() == mentor)
            await client.close()

            #expect(await daemon.stop(with: SIGTERM) == 0, "mentoryd did not stop cleanly:\n\(daemon.logTail())")
            #expect(!FileManager.default.fileExists(atPath: state + "/mentoryd.sqlite-wal"))
            daemon = try await DaemonProcess.start(socketPath: socket, stateDirectory: state, logPath: log)

            client = try await MentoryClient.connect(socketPath: socket, clientName: "restart-test")
            #expect(try await client.mentorGet() == mentor)
            #expect(try await client.diaryList(limit: 1000) == entries)
            // A subscriber's first values are the last acknowledged states.
            _ = try await client.subscribe(topics: [WireNames.mentor, WireNames.diary])
            var snapshots: [String: Data] = [:]
            for await event in client.events {
                if event.kind == .snapshot { snapshots[event.topic] = event.body }
                if snapshots.count == 2 { break }
            }
            #expect(try Mentory_V1_MentorState(serializedBytes: snapshots[WireNames.mentor] ?? Data()) == mentor)
            #expect(
                try Mentory_V1_DiarySnapshot(serializedBytes: snapshots[WireNames.diary] ?? Data()).entries == entries)

            // An online backup over the socket, then a daemon started on the copy serves the same data.
            let backup = directory + "/backup.sqlite"
            let summary = try await Backup.download(from: client, to: backup)
            #expect(summary.diaryEntries == 11)
            await client.close()
            #expect(await daemon.stop(with: SIGTERM) == 0)

            let restored = directory + "/restored"
            try FileManager.default.createDirectory(atPath: restored, withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: backup, toPath: restored + "/mentoryd.sqlite")
            daemon = try await DaemonProcess.start(socketPath: socket, stateDirectory: restored, logPath: log)
            client = try await MentoryClient.connect(socketPath: socket, clientName: "restart-test")
            #expect(try await client.mentorGet() == mentor)
            #expect(try await client.diaryList(limit: 1000) == entries)
            await client.close()
            #expect(await daemon.stop(with: SIGTERM) == 0)
        }
    }

    @Test("a damaged database stops mentoryd at start-up with a clear message and is left untouched")
    func damagedDatabaseStopsStartup() async throws {
        try await withScratchDirectory { directory in
            let state = directory + "/state"
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            let database = state + "/mentoryd.sqlite"
            let garbage = Data("this is not a database, it is a diary written in plain text\n".utf8)
            try garbage.write(to: URL(fileURLWithPath: database))
            let daemon = try await DaemonProcess.start(
                socketPath: directory + "/mentoryd.sock",
                stateDirectory: state,
                logPath: directory + "/mentoryd.log",
                waitUntilServing: false
            )
            let status = await daemon.waitForExit()
            #expect(status != nil && status != 0)
            let log = daemon.logTail()
            #expect(log.contains("damaged"), "log:\n\(log)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == garbage)
            #expect(!FileManager.default.fileExists(atPath: directory + "/mentoryd.sock"))
        }
    }
}
