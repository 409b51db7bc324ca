import MentoryDiary
import MentoryEngine
import MentoryHandlerKit
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

/// The largest valid add: every field at its limit.
func maximalAdd(_ date: String) -> Mentory_V1_DiaryAddRequest {
    var request = Mentory_V1_DiaryAddRequest.make(
        date,
        title: String(repeating: "t", count: FieldLimits.diaryTitle.maximum),
        text: String(repeating: "x", count: FieldLimits.diaryText.maximum)
    )
    request.analysis = String(repeating: "a", count: FieldLimits.diaryAnalysis.maximum)
    request.actionItems = (0..<FieldLimits.actionItemCount.maximum).map { index in
        var item = Mentory_V1_ActionItem()
        let prefix = "item-\(index)-"
        item.id = prefix + String(repeating: "i", count: FieldLimits.id.maximum - prefix.utf8.count)
        item.text = String(repeating: "s", count: FieldLimits.actionItemText.maximum)
        item.done = true
        return item
    }
    request.id = EntityID.random()
    request.createdAtUnixMs = .max
    return request
}

/// The size of the frame payload carrying `response`.
func frameSize(_ response: Mentory_V1_Response) throws -> Int {
    var envelope = Mentory_V1_Envelope()
    envelope.response = response
    return try (envelope.serializedBytes() as [UInt8]).count
}

/// The size of the frame payload carrying `event`.
func frameSize(_ event: Mentory_V1_Event) throws -> Int {
    var envelope = Mentory_V1_Envelope()
    envelope.event = event
    return try (envelope.serializedBytes() as [UInt8]).count
}

@Suite("Diary handler: every reply fits a frame")
struct DiaryReplyBoundTests {
    @Test("paging through large entries returns each exactly once, every reply within the frame limit")
    func pagingLargeEntries() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        var added: [String] = []
        for index in 0..<24 {
            let date = day(index)
            // Mostly maximal entries, some small ones between them.
            let request = index % 3 == 2 ? Mentory_V1_DiaryAddRequest.make(date) : maximalAdd(date)
            let response = try await fixture.send(WireNames.diary, "add", request, from: client)
            #expect(try frameSize(response) <= WireProtocol.defaultMaxFrameLength)
            added.append(try Mentory_V1_DiaryEntry(serializedBytes: response.body).id)
        }
        var seen: [String] = []
        var dates: [String] = []
        var pages = 0
        var before: String?
        while true {
            var request = Mentory_V1_DiaryListRequest()
            request.limit = 1000
            if let before { request.before = before }
            let response = try await fixture.send(WireNames.diary, "list", request, from: client)
            guard case .body(let body) = response.result else {
                Issue.record("list failed: \(response.error.message)")
                return
            }
            #expect(body.count <= ReplyBudget.defaultBodyBytes)
            #expect(try frameSize(response) <= WireProtocol.defaultMaxFrameLength)
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
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        for index in 0..<5 {
            _ = try await fixture.call(
                WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make(day(index)), from: client,
                as: Mentory_V1_DiaryEntry.self)
        }
        var request = Mentory_V1_DiaryListRequest()
        request.limit = 3
        let first = try await fixture.call(
            WireNames.diary, "list", request, from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(first.entries.map(\.recordDate) == [day(4), day(3), day(2)])
        #expect(first.nextBefore == day(2))
        request.before = first.nextBefore
        let second = try await fixture.call(
            WireNames.diary, "list", request, from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(second.entries.map(\.recordDate) == [day(1), day(0)])
        #expect(!second.hasNextBefore)
        request.limit = 2
        request.clearBefore()
        request.before = day(2)
        let exact = try await fixture.call(
            WireNames.diary, "list", request, from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(exact.entries.count == 2)
        #expect(!exact.hasNextBefore, "exactly the last entries: nothing follows")
    }

    @Test("the snapshot holds the newest 100 entries and where to page the rest")
    func snapshotByCount() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        for index in 0..<(DiaryHandler.defaultSnapshotLimit + 30) {
            _ = try await fixture.call(
                WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make(day(index)), from: client,
                as: Mentory_V1_DiaryEntry.self)
        }
        _ = try await fixture.subscribe(client, to: [WireNames.diary])
        let event = try #require(await sink.next().first)
        #expect(event.kind == .snapshot)
        let snapshot = try Mentory_V1_DiarySnapshot(serializedBytes: event.body)
        #expect(snapshot.entries.count == DiaryHandler.defaultSnapshotLimit)
        #expect(snapshot.entries.first?.recordDate == day(DiaryHandler.defaultSnapshotLimit + 29))
        #expect(snapshot.nextBefore == day(30))
        var rest = Mentory_V1_DiaryListRequest()
        rest.limit = 1000
        rest.before = snapshot.nextBefore
        let older = try await fixture.call(
            WireNames.diary, "list", rest, from: client, as: Mentory_V1_DiaryListReply.self)
        #expect(older.entries.count == 30)
        #expect(!older.hasNextBefore)
    }

    @Test("a snapshot of large entries stays within the frame limit; a small diary's snapshot is complete")
    func snapshotByBytes() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        _ = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make(day(0)), from: client,
            as: Mentory_V1_DiaryEntry.self)
        _ = try await fixture.subscribe(client, to: [WireNames.diary])
        let small = try Mentory_V1_DiarySnapshot(serializedBytes: try #require(await sink.next().first).body)
        #expect(small.entries.count == 1)
        #expect(!small.hasNextBefore)

        for index in 1..<16 {
            _ = try await fixture.call(
                WireNames.diary, "add", maximalAdd(day(index)), from: client, as: Mentory_V1_DiaryEntry.self)
        }
        _ = await sink.next(15)  // the adds' changes
        let (late, lateSink) = await fixture.connect()
        _ = try await fixture.subscribe(late, to: [WireNames.diary])
        let event = try #require(await lateSink.next().first)
        #expect(event.body.count <= ReplyBudget.defaultBodyBytes)
        #expect(try frameSize(event) <= WireProtocol.defaultMaxFrameLength)
        let snapshot = try Mentory_V1_DiarySnapshot(serializedBytes: event.body)
        #expect(snapshot.entries.count < 16)
        #expect(snapshot.entries.first?.recordDate == day(15))
        #expect(snapshot.nextBefore == snapshot.entries.last?.recordDate)
    }
}

@Suite("Diary handler: imports and no-op changes")
struct DiaryIdempotenceTests {
    @Test("two concurrent identical imports both succeed, and one change is published")
    func concurrentImports() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        _ = try await fixture.subscribe(client, to: [WireNames.diary])
        _ = await sink.next()  // snapshot
        var request = Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: ["rest"])
        request.id = EntityID.random()
        request.actionItems[0].id = EntityID.random()
        request.createdAtUnixMs = 1_700_000_000_000
        let imported = request
        async let first = fixture.send(WireNames.diary, "add", imported, from: client, id: 10)
        async let second = fixture.send(WireNames.diary, "add", imported, from: client, id: 11)
        let responses = try await [first, second]
        for response in responses {
            guard case .body(let body) = response.result else {
                Issue.record("an identical import failed: \(response.error.message)")
                continue
            }
            #expect(try Mentory_V1_DiaryEntry(serializedBytes: body).id == request.id)
        }
        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = request.id
        _ = try await fixture.call(WireNames.diary, "delete", delete, from: client, as: Mentory_V1_DiaryEntry.self)
        let events = await sink.next(2)
        let changes = try events.map { try Mentory_V1_DiaryChange(serializedBytes: $0.body).change }
        #expect(changes.count == 2)
        if case .added(let entry)? = changes.first {
            #expect(entry.id == request.id)
        } else {
            Issue.record("expected the add, got \(String(describing: changes.first))")
        }
        #expect(changes.last == .deletedID(request.id), "the second import published nothing")
    }

    @Test("ids written in uppercase are stored in lowercase, and importing them again changes nothing")
    func uppercaseIDs() async throws {
        let fixture = try await EngineFixture()
        let (client, _) = await fixture.connect()
        let id = EntityID.random()
        let itemID = EntityID.random()
        var request = Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: ["rest"])
        request.id = id.uppercased()
        request.actionItems[0].id = itemID.uppercased()
        request.createdAtUnixMs = 1_700_000_000_000
        let added = try await fixture.call(
            WireNames.diary, "add", request, from: client, as: Mentory_V1_DiaryEntry.self)
        #expect(added.id == id)
        #expect(added.actionItems[0].id == itemID)
        let again = try await fixture.call(
            WireNames.diary, "add", request, from: client, as: Mentory_V1_DiaryEntry.self)
        #expect(again == added)
        request.id = id
        request.actionItems[0].id = itemID
        #expect(
            try await fixture.call(WireNames.diary, "add", request, from: client, as: Mentory_V1_DiaryEntry.self)
                == added)
        var get = Mentory_V1_DiaryGetRequest()
        get.id = id.uppercased()
        #expect(
            try await fixture.call(WireNames.diary, "get", get, from: client, as: Mentory_V1_DiaryEntry.self) == added)
        var done = Mentory_V1_DiarySuggestionDoneRequest()
        done.entryID = id.uppercased()
        done.suggestionID = itemID.uppercased()
        done.done = true
        let ticked = try await fixture.call(
            WireNames.diary, "setSuggestionDone", done, from: client, as: Mentory_V1_DiaryEntry.self)
        #expect(ticked.actionItems[0].done)
        #expect(await fixture.store.entries(limit: 10, before: nil).map(\.id) == [id])
    }

    @Test("ticking an item that is already done succeeds and publishes nothing")
    func noOpSuggestionDone() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        let entry = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21", suggestions: ["rest"]),
            from: client, as: Mentory_V1_DiaryEntry.self)
        _ = try await fixture.subscribe(client, to: [WireNames.diary])
        let snapshot = try #require(await sink.next().first)
        var request = Mentory_V1_DiarySuggestionDoneRequest()
        request.entryID = entry.id
        request.suggestionID = entry.actionItems[0].id
        request.done = false  // already not done
        #expect(
            try await fixture.call(
                WireNames.diary, "setSuggestionDone", request, from: client, as: Mentory_V1_DiaryEntry.self)
                == entry)
        request.done = true
        let ticked = try await fixture.call(
            WireNames.diary, "setSuggestionDone", request, from: client, as: Mentory_V1_DiaryEntry.self)
        _ = try await fixture.call(
            WireNames.diary, "setSuggestionDone", request, from: client, as: Mentory_V1_DiaryEntry.self)
        var delete = Mentory_V1_DiaryDeleteRequest()
        delete.id = entry.id
        _ = try await fixture.call(WireNames.diary, "delete", delete, from: client, as: Mentory_V1_DiaryEntry.self)
        let events = await sink.next(2)
        #expect(events.map(\.sequence) == [snapshot.sequence + 1, snapshot.sequence + 2])
        #expect(try Mentory_V1_DiaryChange(serializedBytes: events[0].body).change == .updated(ticked))
        #expect(try Mentory_V1_DiaryChange(serializedBytes: events[1].body).change == .deletedID(entry.id))
    }

    @Test("a failed save is refused, changes nothing and publishes nothing")
    func failedWrite() async throws {
        let fixture = try await EngineFixture()
        let (client, sink) = await fixture.connect()
        _ = try await fixture.subscribe(client, to: [WireNames.diary])
        let snapshot = try #require(await sink.next().first)
        await fixture.store.failWrites(with: .storageFailure("the disk is full"))
        #expect(
            try await fixture.failure(
                WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-20"), from: client)
                == .storageFailure)
        await fixture.store.failWrites(with: nil)
        let added = try await fixture.call(
            WireNames.diary, "add", Mentory_V1_DiaryAddRequest.make("2026-11-21"), from: client,
            as: Mentory_V1_DiaryEntry.self)
        let event = try #require(await sink.next().first)
        #expect(event.sequence == snapshot.sequence + 1)
        #expect(try Mentory_V1_DiaryChange(serializedBytes: event.body).change == .added(added))
        #expect(await fixture.store.entries(limit: 10, before: nil) == [added])
    }
}

/// The calendar day `index` days after 2001-01-01 (index < 365).
func day(_ index: Int) -> String {
    var month = 1
    var rest = index
    let lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    while rest >= lengths[month - 1] {
        rest -= lengths[month - 1]
        month += 1
    }
    return CalendarDay(year: 2001, month: month, day: rest + 1)!.description
}
