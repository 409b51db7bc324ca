import Foundation
import Glibc
import MentoryAdvisor
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import Testing

@Suite("The advisor's rules")
struct AdvisorRulesTests {
    static let emotions: [Mentory_V1_Emotion] = [
        .veryUnpleasant, .unpleasant, .slightlyUnpleasant, .neutral, .slightlyPleasant, .pleasant, .veryPleasant,
    ]

    @Test("each of the seven emotions has its own message; keywords add action items, at most four")
    func rules() {
        let contents = Set(Self.emotions.map { AdvisorRules.advise(emotion: $0, text: "", character: .warm).content })
        #expect(contents.count == 7)
        let advice = AdvisorRules.advise(
            emotion: .unpleasant, text: "Tired after work, worried about my friend", character: .cool)
        #expect(advice.character == .cool)
        #expect(!advice.fallback)
        #expect(advice.actionItems.count == AdvisorRules.maxActionItems)
        #expect(advice.actionItems.first == AdvisorRules.base(for: .unpleasant).action)
        #expect(
            advice
                == AdvisorRules.advise(
                    emotion: .unpleasant, text: "Tired after work, worried about my friend", character: .cool))
    }

    @Test("a text too long to analyse gets the emotion's default message, marked fallback")
    func fallback() {
        let long = String(repeating: "x", count: AdvisorRules.maxAnalysedCharacters + 1)
        let advice = AdvisorRules.advise(emotion: .pleasant, text: long + " sleep", character: .warm)
        #expect(advice.fallback)
        #expect(advice.actionItems == [AdvisorRules.base(for: .pleasant).action])
    }
}

@Suite("mentory-advisor against the real daemon", .timeLimit(.minutes(10)))
struct AdvisorEndToEndTests {
    /// Starts `mentory-advisor` on the daemon's socket; it dies with the test process.
    static func startAdvisor(
        socketPath: String, character: String = "cool", stateFile: String? = nil
    ) async throws -> Process {
        let process = Process()
        process.executableURL = ProductBinaries.url(of: "mentory-advisor")
        process.arguments =
            ["--socket", socketPath, "--character", character] + (stateFile.map { ["--state-file", $0] } ?? [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try await process.runTiedToTestProcess()
        return process
    }

    /// Waits until the daemon reports the advisor `state`.
    static func waitFor(_ state: Mentory_V1_PluginState, _ client: MentoryClient) async throws {
        let became = try await eventually(timeout: .seconds(30), interval: .milliseconds(50)) {
            try await client.status().plugins.first?.state == state
        }
        if !became { Issue.record("the advisor never became \(state)") }
    }

    @Test("suggest through the daemon; kill -9 of the advisor leaves its namespace UNAVAILABLE, no hang")
    func suggestAndKill() async throws {
        let daemon = try await DaemonProcess(
            environment: ["MENTORYD_STORAGE_BACKEND": "memory"], config: #"{"plugins": {"advisor": {}}}"#)
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        let advisor = try await Self.startAdvisor(socketPath: daemon.socketPath)
        try await Self.waitFor(.connected, client)

        var request = Mentory_Advisor_V1_SuggestRequest()
        request.emotion = .slightlyUnpleasant
        request.text = "Could not sleep before the exam"
        let advice = try await client.call(MentoryAdvisorSchema.Advisor.suggest, request)
        #expect(advice == AdvisorRules.advise(emotion: request.emotion, text: request.text, character: .cool))
        #expect(advice.actionItems.count == 3)

        kill(advisor.processIdentifier, SIGKILL)
        _ = await advisor.waitForExit()
        try await Self.waitFor(.waiting, client)
        do {
            _ = try await client.call(MentoryAdvisorSchema.Advisor.suggest, request)
            Issue.record("a killed advisor answered")
        } catch {
            #expect(error.remoteCode == .unavailable)
        }
        await client.close()
        #expect(await daemon.stop() == 0)
    }

    /// Waits until the advisor has handled the diary up to its newest event.
    static func waitForPosition(_ stateFile: String, _ client: MentoryClient) async throws {
        let caughtUp = try await eventually(timeout: .seconds(30), interval: .milliseconds(50)) {
            let newest = try await client.status().topics.first { $0.topic == "diary" }?.sequence ?? 0
            let saved = (try? String(contentsOfFile: stateFile, encoding: .utf8))?
                .split(separator: " ").last.flatMap { UInt64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return saved == newest
        }
        if !caughtUp { Issue.record("the advisor never caught up with the diary") }
    }

    @Test("an entry added today gets the advice as today's mentor message; a message set today is never overwritten")
    func diaryAdvice() async throws {
        let daemon = try await DaemonProcess(
            environment: ["MENTORYD_STORAGE_BACKEND": "memory"], config: #"{"plugins": {"advisor": {}}}"#)
        defer { daemon.removeFiles() }
        let stateFile = daemon.directory + "/advisor-position"
        let client = try await daemon.client()
        let advisor = try await Self.startAdvisor(socketPath: daemon.socketPath, stateFile: stateFile)
        defer { kill(advisor.processIdentifier, SIGKILL) }
        try await Self.waitFor(.connected, client)
        try await Self.waitForPosition(stateFile, client)

        var entry = Mentory_V1_DiaryAddRequest()
        entry.recordDate = DiaryWatcher.today()
        entry.title = "A day"
        entry.text = "Went for a run with a friend"
        entry.emotion = .pleasant
        let added = try await client.diaryAdd(entry)
        try await Self.waitForPosition(stateFile, client)
        let expected = AdvisorRules.advise(emotion: .pleasant, text: entry.text, character: .cool)
        let set = try await client.mentorGet()
        #expect(set.message.content == expected.content)
        #expect(set.message.character == .cool)
        #expect(set.message.actionItems.map(\.text) == expected.actionItems)

        // Someone else's message today stays, even when a new entry for today comes in.
        var mine = Mentory_V1_MentorSetRequest()
        mine.content = "mine"
        mine.character = .warm
        _ = try await client.mentorSet(mine)
        _ = try await client.diaryDelete(id: added.id)
        entry.emotion = .veryUnpleasant
        _ = try await client.diaryAdd(entry)
        try await Self.waitForPosition(stateFile, client)
        #expect(try await client.mentorGet().message.content == "mine")
        await client.close()
        #expect(await daemon.stop() == 0)
    }
}
