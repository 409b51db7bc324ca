import Foundation
import MentoryClient
import MentoryDomain
import MentoryWire
import Testing

@testable import mentoryctl

@Suite("mentoryctl diary export / import and backup", .serialized, .timeLimit(.minutes(10)))
struct TransferCommandTests {
    @Test("export writes JSON Lines that import restores identically, and importing twice changes nothing")
    func exportThenImport() async throws {
        try await withScratchDirectory { directory in
            let socket = directory + "/mentoryd.sock"
            let log = directory + "/mentoryd.log"
            var daemon = try await DaemonProcess.start(
                socketPath: socket, stateDirectory: directory + "/a", logPath: log)
            var client = try await MentoryClient.connect(socketPath: socket, clientName: "transfer-test")
            for index in 0..<7 {
                let entry = try await client.diaryAdd(addRequest(index * 3 + 3, client: 1))
                if let item = entry.actionItems.first {
                    _ = try await client.diarySetSuggestionDone(
                        entryID: entry.id, suggestionID: item.id, done: !item.done)
                }
            }
            let original = try await client.diaryList(limit: 1000)
            await client.close()

            let file = directory + "/diary.jsonl"
            try await Mentoryctl.run(["diary", "export", "--socket", socket, "--output", file])
            let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == original.count)
            #expect(try lines.map { try Mentory_V1_DiaryEntry(jsonString: String($0)) } == original)
            let backup = directory + "/backup.sqlite"
            try await Mentoryctl.run(["backup", "--socket", socket, "--to", backup])
            #expect(FileManager.default.fileExists(atPath: backup))
            #expect(await daemon.stop(with: SIGTERM) == 0)

            // A fresh daemon: import restores every entry exactly, twice over without change.
            daemon = try await DaemonProcess.start(socketPath: socket, stateDirectory: directory + "/b", logPath: log)
            try await Mentoryctl.run(["diary", "import", "--socket", socket, "--input", file])
            try await Mentoryctl.run(["diary", "import", "--socket", socket, "--input", file, "--concurrency", "3"])
            client = try await MentoryClient.connect(socketPath: socket, clientName: "transfer-test")
            #expect(try await client.diaryList(limit: 1000) == original)

            // Outcomes of single entries: unchanged, conflicting content under the same id.
            #expect(try await Self.outcome(DiaryImport.importEntry(original[0], client: client)) == "unchanged")
            var altered = original[0]
            altered.title = "Rewritten"
            #expect(try await Self.outcome(DiaryImport.importEntry(altered, client: client)) == "failed")
            await client.close()
            #expect(await daemon.stop(with: SIGTERM) == 0)
        }
    }

    @Test("import checks every line first and imports nothing from a damaged file")
    func importRejectsBadLines() throws {
        let good = try addEntryJSON("00000000-0000-4000-8000-000000000001")
        let text = good + "\n\n{\"recordDate\": 12}\nnot json\n"
        #expect(throws: TransferError.self) { try DiaryImport.parse(Data(text.utf8)) }
        let duplicate = good + "\n" + good + "\n"
        #expect(throws: TransferError.self) { try DiaryImport.parse(Data(duplicate.utf8)) }
        #expect(try DiaryImport.parse(Data((good + "\n\n").utf8)).map(\.line) == [1])
    }

    static func outcome(_ outcome: DiaryImport.Outcome) -> String {
        switch outcome {
        case .added: "added"
        case .unchanged: "unchanged"
        case .failed: "failed"
        }
    }
}

private func addEntryJSON(_ id: String) throws -> String {
    var entry = Mentory_V1_DiaryEntry()
    entry.id = id
    entry.recordDate = "2024-01-01"
    entry.title = "Title"
    entry.text = "Text"
    entry.emotion = .neutral
    return try entry.jsonString()
}

@Suite("mentoryctl and the client page through large diaries", .serialized, .timeLimit(.minutes(10)))
struct LargeDiaryTransferTests {
    /// An entry with every field at its limit (about 100 KB), its action item ids UUIDs.
    static func maximalAdd(_ index: Int) -> Mentory_V1_DiaryAddRequest {
        var request = addRequest(index, client: 9)
        request.title = String(repeating: "t", count: FieldLimits.diaryTitle.maximum)
        request.text = String(repeating: "x", count: FieldLimits.diaryText.maximum)
        request.analysis = String(repeating: "a", count: FieldLimits.diaryAnalysis.maximum)
        request.actionItems = (0..<FieldLimits.actionItemCount.maximum).map { _ in
            var item = Mentory_V1_ActionItem()
            item.id = EntityID.random()
            item.text = String(repeating: "s", count: FieldLimits.actionItemText.maximum)
            return item
        }
        return request
    }

    @Test("entries too large for one frame are all listed and exported; an uppercased export re-imports unchanged")
    func largeEntries() async throws {
        try await withScratchDirectory { directory in
            let socket = directory + "/mentoryd.sock"
            let daemon = try await DaemonProcess.start(
                socketPath: socket, stateDirectory: directory + "/state", logPath: directory + "/mentoryd.log")
            let client = try await MentoryClient.connect(socketPath: socket, clientName: "large-diary-test")
            let count = 14  // about 1.4 MB: more than one 1 MiB frame holds
            for index in 0..<count {
                _ = try await client.diaryAdd(Self.maximalAdd(index * 2 + 1))
            }
            let first = try await client.diaryListPage(limit: 1000)
            #expect(first.entries.count < count, "one reply holds what fits a frame")
            #expect(first.hasNextBefore)
            let listed = try await client.diaryList(limit: 1000)
            #expect(listed.count == count)
            #expect(Set(listed.map(\.id)).count == count)
            #expect(try await client.diaryListAll() == listed)

            let file = directory + "/diary.jsonl"
            try await Mentoryctl.run(["diary", "export", "--socket", socket, "--output", file])
            let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
            #expect(try lines.map { try Mentory_V1_DiaryEntry(jsonString: String($0)) } == listed)

            // The same export with its ids in uppercase imports as "already present", changing nothing.
            let upper = try lines.map { line in
                var entry = try Mentory_V1_DiaryEntry(jsonString: String(line))
                entry.id = entry.id.uppercased()
                for index in entry.actionItems.indices {
                    entry.actionItems[index].id = entry.actionItems[index].id.uppercased()
                }
                return try entry.jsonString()
            }
            let upperFile = directory + "/upper.jsonl"
            try upper.joined(separator: "\n").write(toFile: upperFile, atomically: true, encoding: .utf8)
            try await Mentoryctl.run(["diary", "import", "--socket", socket, "--input", upperFile])
            #expect(try await client.diaryList(limit: 1000) == listed)
            await client.close()
            #expect(await daemon.stop(with: SIGTERM) == 0)
        }
    }
}
