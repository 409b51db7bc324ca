import MentoryEngine
import MentoryWire
import Testing

@Suite("Diary handler")
struct DiaryHandlerTests {
    @Test("add, get, list, delete")
    func lifecycle() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        var added: [Mentory_V1_DiaryEntry] = []
        for date in ["2026-11-19", "2026-11-21", "2026-11-20"] {
            added.append(
                try await fixture.call(
                    WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make(date), from: client,
                    as: Mentory_V1_DiaryEntry.self)
            )
        }
        #expect(Set(added.map(\.id)).count == 3)
        var get = Mentory_V1_DiaryGetRequest()
        get.id = added[0].id
        #expect(
            try await fixture.call(WireNames.diary, "get", get, from: client, as: Mentory_V1_DiaryEntry.self)
                == added[0])

        var list = Mentory_V1_DiaryListRequest()
        list.limit = 2
        let page = try await fixture.call(
            WireNames.diary, "list", list, from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(page.entries.map(\.recordDate) == ["2026-11-21", "2026-11-20"])
        list.before = "2026-11-20"
        let older = try await fixture.call(
            WireNames.diary, "list", list, from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(older.entries.map(\.recordDate) == ["2026-11-19"])

        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = added[0].id
        #expect(
            try await fixture.call(WireNames.diary, "delete", delete, from: client, as: Mentory_V1_DiaryEntry.self)
                == added[0])
        #expect(try await fixture.failure(WireNames.diary, "get", get, from: client) == .notFound)
        #expect(try await fixture.failure(WireNames.diary, "delete", delete, from: client) == .notFound)
    }

    @Test("a second entry for the same day is a conflict and the first survives")
    func sameDayConflict() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        let first = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21", title: "first"), from: client,
            as: Mentory_V1_DiaryEntry.self
        )
        #expect(
            try await fixture.failure(
                WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21", title: "second"), from: client)
                == .conflict)
        var get = Mentory_V1_DiaryGetRequest()
        get.id = first.id
        #expect(
            try await fixture.call(WireNames.diary, "get", get, from: client, as: Mentory_V1_DiaryEntry.self).title
                == "first")
    }

    @Test(
        "invalid entries get a validation error",
        arguments: [
            Mentory_V1_DiaryAddRequest.make("2026-11-21", title: ""),
            Mentory_V1_DiaryAddRequest.make("2026-11-21", text: " \n"),
            Mentory_V1_DiaryAddRequest.make("2026-02-30"),
            Mentory_V1_DiaryAddRequest.make("yesterday"),
            Mentory_V1_DiaryAddRequest.make("2026-11-21", emotion: .unspecified),
            Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: [""]),
        ]
    )
    func validation(_ request: Mentory_V1_DiaryAddRequest) async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        #expect(try await fixture.failure(WireNames.diary, "add", request, from: client) == .invalidArgument)
        #expect(await fixture.store.entries(limit: 10, before: nil).isEmpty)
    }

    @Test("suggestion done flags toggle and are published")
    func suggestionDone() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        let entry = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: ["rest", "call mum"]),
            from: client, as: Mentory_V1_DiaryEntry.self
        )
        _ = try await fixture.subscribe(client, to: [WireNames.diary])
        _ = await sink.next()  // snapshot
        var request = Mentory_V1_DiarySuggestionDoneRequest()
        request.entryID = entry.id
        request.suggestionID = entry.actionItems[1].id
        request.done = true
        let updated = try await fixture.call(
            WireNames.diary, "setSuggestionDone", request, from: client, as: Mentory_V1_DiaryEntry.self)
        #expect(updated.actionItems.map(\.done) == [false, true])
        let event = try #require(await sink.next().first)
        #expect(try Mentory_V1_DiaryChange(serializedBytes: event.body).updated == updated)
        request.done = false
        let undone = try await fixture.call(
            WireNames.diary, "setSuggestionDone", request, from: client, as: Mentory_V1_DiaryEntry.self)
        #expect(undone.actionItems.map(\.done) == [false, false])
        request.suggestionID = "missing"
        #expect(try await fixture.failure(WireNames.diary, "setSuggestionDone", request, from: client) == .notFound)
    }

    @Test("re-adding an identical entry by id is a no-op; a different one is a conflict")
    func idempotentImport() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        var request = Mentory_V1_DiaryAddRequest.make("2026-11-21")
        request.id = "6f1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a1"
        request.createdAtUnixMs = 1_700_000_000_000
        let first = try await fixture.call(
            WireNames.diary, "add", request, from: client, as: Mentory_V1_DiaryEntry.self)
        let again = try await fixture.call(
            WireNames.diary, "add", request, from: client, as: Mentory_V1_DiaryEntry.self)
        #expect(first == again)
        request.title = "changed"
        #expect(try await fixture.failure(WireNames.diary, "add", request, from: client) == .conflict)
    }
}
