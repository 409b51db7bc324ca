import MentoryDiary
import MentoryDomain
import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryStorage
import MentoryWire
import MentoryWireFixtures
import Testing

typealias Diary = MentorySchema.Diary

/// The diary handler over `store`, hosted as the daemon hosts it.
func openDiary(_ store: InMemorySessionStore = InMemorySessionStore()) async throws
    -> HandlerTestHarness<DiaryHandler>
{
    try await HandlerTestHarness.open(DiaryHandler(store: store), clock: FixedSessionClock())
}

/// A `diary` topic change.
func diaryChange(_ change: Mentory_V1_DiaryChange.OneOf_Change) -> Mentory_V1_DiaryChange {
    var message = Mentory_V1_DiaryChange()
    message.change = change
    return message
}

@Suite("Diary handler")
struct DiaryHandlerTests {
    @Test("add, get, list, delete")
    func lifecycle() async throws {
        let harness = try await openDiary()
        var added: [Mentory_V1_DiaryEntry] = []
        for date in ["2026-11-19", "2026-11-21", "2026-11-20"] {
            added.append(try await harness.call(Diary.add, .make(date)))
        }
        #expect(Set(added.map(\.id)).count == 3)
        #expect(added.allSatisfy { $0.createdAtUnixMs == 1_795_300_000_000 })
        var get = Mentory_V1_DiaryGetRequest()
        get.id = added[0].id
        #expect(try await harness.call(Diary.get, get) == added[0])

        var list = Mentory_V1_DiaryListRequest()
        list.limit = 2
        let page = try await harness.call(Diary.list, list)
        #expect(page.entries.map(\.recordDate) == ["2026-11-21", "2026-11-20"])
        list.before = "2026-11-20"
        let older = try await harness.call(Diary.list, list)
        #expect(older.entries.map(\.recordDate) == ["2026-11-19"])

        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = added[0].id
        #expect(try await harness.call(Diary.delete, delete) == added[0])
        #expect(await failure(harness, Diary.get, get) == .notFound)
        #expect(await failure(harness, Diary.delete, delete) == .notFound)
        #expect(
            try await harness.published(on: Diary.diaryTopic)
                == added.map { diaryChange(.added($0)) } + [diaryChange(.deletedID(added[0].id))])
    }

    @Test("a second entry for the same day is a conflict and the first survives")
    func sameDayConflict() async throws {
        let harness = try await openDiary()
        let first = try await harness.call(Diary.add, .make("2026-11-21", title: "first"))
        #expect(await failure(harness, Diary.add, .make("2026-11-21", title: "second")) == .conflict)
        var get = Mentory_V1_DiaryGetRequest()
        get.id = first.id
        #expect(try await harness.call(Diary.get, get).title == "first")
        #expect(try await harness.published(on: Diary.diaryTopic) == [diaryChange(.added(first))])
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
        let store = InMemorySessionStore()
        let harness = try await openDiary(store)
        #expect(await failure(harness, Diary.add, request) == .invalidArgument)
        #expect(await store.entries(limit: 10, before: nil).isEmpty)
        #expect(try await harness.published(on: Diary.diaryTopic).isEmpty)
    }

    @Test("suggestion done flags toggle and are published")
    func suggestionDone() async throws {
        let harness = try await openDiary()
        let entry = try await harness.call(Diary.add, .make("2026-11-21", suggestions: ["rest", "call mum"]))
        var request = Mentory_V1_DiarySuggestionDoneRequest()
        request.entryID = entry.id
        request.suggestionID = entry.actionItems[1].id
        request.done = true
        let updated = try await harness.call(Diary.setSuggestionDone, request)
        #expect(updated.actionItems.map(\.done) == [false, true])
        #expect(try await harness.published(on: Diary.diaryTopic).last == diaryChange(.updated(updated)))
        request.done = false
        let undone = try await harness.call(Diary.setSuggestionDone, request)
        #expect(undone.actionItems.map(\.done) == [false, false])
        request.suggestionID = "missing"
        #expect(await failure(harness, Diary.setSuggestionDone, request) == .notFound)
        #expect(
            try await harness.published(on: Diary.diaryTopic)
                == [diaryChange(.added(entry)), diaryChange(.updated(updated)), diaryChange(.updated(undone))])
    }

    @Test("re-adding an identical entry by id is a no-op; a different one is a conflict")
    func idempotentImport() async throws {
        let harness = try await openDiary()
        var request = Mentory_V1_DiaryAddRequest.make("2026-11-21")
        request.id = "6f1c2a52-9c51-4c39-8d3c-0d5bb7c7e9a1"
        request.createdAtUnixMs = 1_700_000_000_000
        let first = try await harness.call(Diary.add, request)
        let again = try await harness.call(Diary.add, request)
        #expect(first == again)
        request.title = "changed"
        #expect(await failure(harness, Diary.add, request) == .conflict)
        #expect(try await harness.published(on: Diary.diaryTopic) == [diaryChange(.added(first))])
    }
}

@Suite("Diary handler: every reply fits a frame")
struct DiaryReplyBoundTests {
    @Test("paging through large entries returns each exactly once, every reply within the reply budget")
    func pagingLargeEntries() async throws {
        let harness = try await openDiary()
        var added: [String] = []
        for index in 0..<24 {
            let date = day(index)
            // Mostly maximal entries, some small ones between them.
            let request = index % 3 == 2 ? Mentory_V1_DiaryAddRequest.make(date) : maximalAdd(date)
            let body = try await harness.callRaw(Diary.add.name, body: request.wireBody())
            #expect(body.count <= ReplyBudget.defaultBodyBytes)
            added.append(try Mentory_V1_DiaryEntry(serializedBytes: body).id)
        }
        var seen: [String] = []
        var dates: [String] = []
        var pages = 0
        var before: String?
        while true {
            var request = Mentory_V1_DiaryListRequest()
            request.limit = 1000
            if let before { request.before = before }
            let body = try await harness.callRaw(Diary.list.name, body: request.wireBody())
            #expect(body.count <= ReplyBudget.defaultBodyBytes)
            let page = try Mentory_V1_DiaryListReply(serializedBytes: body)
            pages += 1
            seen += page.entries.map(\.id)
            dates += page.entries.map(\.recordDate)
            guard page.hasNextBefore else { break }
            #expect(page.nextBefore == page.entries.last?.recordDate)
            before = page.nextBefore
            try #require(pages < 24, "paging does not end")
        }
        #expect(pages > 1, "24 entries of ~100 KB do not fit one 1 MiB reply")
        #expect(seen.count == added.count)
        #expect(Set(seen) == Set(added))
        #expect(dates == dates.sorted(by: >))
    }

    @Test("a page stops at the limit and says where to continue, and not when nothing follows")
    func cursorAtLimit() async throws {
        let harness = try await openDiary()
        for index in 0..<5 {
            _ = try await harness.call(Diary.add, .make(day(index)))
        }
        var request = Mentory_V1_DiaryListRequest()
        request.limit = 3
        let first = try await harness.call(Diary.list, request)
        #expect(first.entries.map(\.recordDate) == [day(4), day(3), day(2)])
        #expect(first.nextBefore == day(2))
        request.before = first.nextBefore
        let second = try await harness.call(Diary.list, request)
        #expect(second.entries.map(\.recordDate) == [day(1), day(0)])
        #expect(!second.hasNextBefore)
        request.limit = 2
        request.clearBefore()
        request.before = day(2)
        let exact = try await harness.call(Diary.list, request)
        #expect(exact.entries.count == 2)
        #expect(!exact.hasNextBefore, "exactly the last entries: nothing follows")
    }

    @Test("the snapshot holds the newest 100 entries and where to page the rest")
    func snapshotByCount() async throws {
        let harness = try await openDiary()
        for index in 0..<(DiaryHandler.defaultSnapshotLimit + 30) {
            _ = try await harness.call(Diary.add, .make(day(index)))
        }
        let snapshot = try await harness.snapshot(of: Diary.diaryTopic)
        #expect(snapshot.entries.count == DiaryHandler.defaultSnapshotLimit)
        #expect(snapshot.entries.first?.recordDate == day(DiaryHandler.defaultSnapshotLimit + 29))
        #expect(snapshot.nextBefore == day(30))
        var rest = Mentory_V1_DiaryListRequest()
        rest.limit = 1000
        rest.before = snapshot.nextBefore
        let older = try await harness.call(Diary.list, rest)
        #expect(older.entries.count == 30)
        #expect(!older.hasNextBefore)
    }

    @Test("a snapshot of large entries stays within the reply budget; a small diary's snapshot is complete")
    func snapshotByBytes() async throws {
        let harness = try await openDiary()
        _ = try await harness.call(Diary.add, .make(day(0)))
        let small = try await harness.snapshot(of: Diary.diaryTopic)
        #expect(small.entries.count == 1)
        #expect(!small.hasNextBefore)

        for index in 1..<16 {
            _ = try await harness.call(Diary.add, maximalAdd(day(index)))
        }
        let snapshot = try await harness.snapshot(of: Diary.diaryTopic)
        #expect(try (snapshot.serializedBytes() as [UInt8]).count <= ReplyBudget.defaultBodyBytes)
        #expect(snapshot.entries.count < 16)
        #expect(snapshot.entries.first?.recordDate == day(15))
        #expect(snapshot.nextBefore == snapshot.entries.last?.recordDate)
    }
}

@Suite("Diary handler: imports and no-op changes")
struct DiaryIdempotenceTests {
    @Test("two concurrent identical imports both succeed, and one change is published")
    func concurrentImports() async throws {
        let harness = try await openDiary()
        var request = Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: ["rest"])
        request.id = EntityID.random()
        request.actionItems[0].id = EntityID.random()
        request.createdAtUnixMs = 1_700_000_000_000
        let imported = request
        async let first = harness.call(Diary.add, imported)
        async let second = harness.call(Diary.add, imported)
        let entries = try await [first, second]
        #expect(entries.map(\.id) == [request.id, request.id])
        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = request.id
        _ = try await harness.call(Diary.delete, delete)
        #expect(
            try await harness.published(on: Diary.diaryTopic)
                == [diaryChange(.added(entries[0])), diaryChange(.deletedID(request.id))],
            "the second import published nothing")
    }

    @Test("ids written in uppercase are stored in lowercase, and importing them again changes nothing")
    func uppercaseIDs() async throws {
        let store = InMemorySessionStore()
        let harness = try await openDiary(store)
        let id = EntityID.random()
        let itemID = EntityID.random()
        var request = Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: ["rest"])
        request.id = id.uppercased()
        request.actionItems[0].id = itemID.uppercased()
        request.createdAtUnixMs = 1_700_000_000_000
        let added = try await harness.call(Diary.add, request)
        #expect(added.id == id)
        #expect(added.actionItems[0].id == itemID)
        #expect(try await harness.call(Diary.add, request) == added)
        request.id = id
        request.actionItems[0].id = itemID
        #expect(try await harness.call(Diary.add, request) == added)
        var get = Mentory_V1_DiaryGetRequest()
        get.id = id.uppercased()
        #expect(try await harness.call(Diary.get, get) == added)
        var done = Mentory_V1_DiarySuggestionDoneRequest()
        done.entryID = id.uppercased()
        done.suggestionID = itemID.uppercased()
        done.done = true
        let ticked = try await harness.call(Diary.setSuggestionDone, done)
        #expect(ticked.actionItems[0].done)
        #expect(await store.entries(limit: 10, before: nil).map(\.id) == [id])
    }

    @Test("ticking an item that is already done succeeds and publishes nothing")
    func noOpSuggestionDone() async throws {
        let harness = try await openDiary()
        let entry = try await harness.call(Diary.add, .make("2026-11-21", suggestions: ["rest"]))
        var request = Mentory_V1_DiarySuggestionDoneRequest()
        request.entryID = entry.id
        request.suggestionID = entry.actionItems[0].id
        request.done = false  // already not done
        #expect(try await harness.call(Diary.setSuggestionDone, request) == entry)
        request.done = true
        let ticked = try await harness.call(Diary.setSuggestionDone, request)
        _ = try await harness.call(Diary.setSuggestionDone, request)
        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = entry.id
        _ = try await harness.call(Diary.delete, delete)
        #expect(
            try await harness.published(on: Diary.diaryTopic)
                == [diaryChange(.added(entry)), diaryChange(.updated(ticked)), diaryChange(.deletedID(entry.id))])
    }

    @Test("a failed save is refused, changes nothing and publishes nothing")
    func failedWrite() async throws {
        let store = InMemorySessionStore()
        let harness = try await openDiary(store)
        let kept = try await harness.call(Diary.add, .make("2026-11-19", suggestions: ["rest"]))
        await store.failWrites(with: .failed("the disk is full"))
        #expect(await failure(harness, Diary.add, .make("2026-11-20")) == .storageFailure)
        var done = Mentory_V1_DiarySuggestionDoneRequest()
        done.entryID = kept.id
        done.suggestionID = kept.actionItems[0].id
        done.done = true
        #expect(await failure(harness, Diary.setSuggestionDone, done) == .storageFailure)
        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = kept.id
        #expect(await failure(harness, Diary.delete, delete) == .storageFailure)
        await store.failWrites(with: nil)
        let added = try await harness.call(Diary.add, .make("2026-11-21"))
        #expect(
            try await harness.published(on: Diary.diaryTopic) == [
                diaryChange(.added(kept)), diaryChange(.added(added)),
            ],
            "the failed changes published nothing")
        #expect(await store.entries(limit: 10, before: nil) == [added, kept])
        #expect(try await harness.snapshot(of: Diary.diaryTopic).entries == [added, kept])
    }
}
