import GratitudeHandler
import MentoryHandlerTesting
import Testing

@Suite("Gratitude handler")
struct GratitudeHandlerTests {
    typealias Gratitude = GratitudeSchema.Gratitude

    private func note(_ text: String) -> Gratitude_V1_GratitudeAddRequest {
        var request = Gratitude_V1_GratitudeAddRequest()
        request.text = text
        return request
    }

    @Test("add numbers each note, publishes it, and list returns them oldest first")
    func addAndList() async throws {
        let harness = try await HandlerTestHarness.open(GratitudeHandler(), clock: FixedSessionClock())
        let first = try await harness.call(Gratitude.add, self.note("tea"))
        let second = try await harness.call(Gratitude.add, self.note("sunlight"))
        #expect([first.number, second.number] == [1, 2])
        #expect(first.addedAtUnixMs == 1_795_300_000_000)
        #expect(try await harness.call(Gratitude.list, Mentory_V1_Empty()).notes == [first, second])
        #expect(try await harness.published(on: Gratitude.gratitudeTopic) == [first, second])
        #expect(try await harness.snapshot(of: Gratitude.gratitudeTopic).notes.count == 2)
    }

    @Test("an empty note fails with the handler's own reason; nothing is published")
    func empty() async throws {
        let harness = try await HandlerTestHarness.open(GratitudeHandler())
        await #expect(throws: GratitudeError.empty) { try await harness.call(Gratitude.add, self.note("  ")) }
        #expect(try await harness.published(on: Gratitude.gratitudeTopic).isEmpty)
    }

    @Test("maxNotes comes from the handler's section and a reload changes it")
    func configuration() async throws {
        let harness = try await HandlerTestHarness.open(
            GratitudeHandler(), config: ["maxNotes": .init(.int(2), isSecret: false)])
        for text in ["a", "b", "c"] { _ = try await harness.call(Gratitude.add, self.note(text)) }
        #expect(try await harness.call(Gratitude.list, Mentory_V1_Empty()).notes.map(\.text) == ["b", "c"])
        try await harness.reload(config: ["maxNotes": .init(.int(1), isSecret: false)])
        _ = try await harness.call(Gratitude.add, self.note("d"))
        #expect(try await harness.call(Gratitude.list, Mentory_V1_Empty()).notes.map(\.text) == ["d"])
        let error = await #expect(throws: HandlerConfigurationError.self) {
            try await harness.reload(config: ["maxNotes": .init(.int(0), isSecret: false)])
        }
        #expect(error?.key == "maxNotes")
    }

    @Test("add and list answer without suspending")
    func immediate() async throws {
        let harness = try await HandlerTestHarness.open(GratitudeHandler())
        #expect(try await harness.answersImmediately(Gratitude.add, self.note("x")))
        #expect(try await harness.answersImmediately(Gratitude.list, Mentory_V1_Empty()))
    }

    // fromDiary calls `diary.list` on its caller's behalf: the harness hosts the built-in diary (in memory)
    // behind the daemon's gate, so the caller's access rules apply as in the daemon.
    @Test("fromDiary reads the caller's diary; a caller denied diary.* is refused")
    func fromDiary() async throws {
        let harness = try await HandlerTestHarness.open(GratitudeHandler(), accessRules: ["deny uid=1000 diary.*"])
        let owner = ConnectionContext.test(id: 1, credentials: PeerCredentials(pid: 1, uid: 1001, gid: 1001))
        var entry = Mentory_V1_DiaryAddRequest()
        entry.recordDate = "2026-11-20"
        entry.emotion = .pleasant
        entry.title = "walk"
        entry.text = "a long walk by the river"
        _ = try await harness.callHosted(MentoryDomainSchema.Diary.add, entry, from: owner)
        let reply = try await harness.call(Gratitude.fromDiary, Gratitude_V1_GratitudeFromDiaryRequest(), from: owner)
        #expect(reply.texts == ["a long walk by the river"])
        let denied = ConnectionContext.test(id: 2, credentials: PeerCredentials(pid: 2, uid: 1000, gid: 1000))
        // The refusal names the handler that called on the caller's behalf.
        await #expect(throws: MentoryError.deniedOnBehalf(namespace: "diary", method: "list", chain: ["gratitude"])) {
            try await harness.call(Gratitude.fromDiary, Gratitude_V1_GratitudeFromDiaryRequest(), from: denied)
        }
    }
}
