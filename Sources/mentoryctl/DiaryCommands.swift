import ArgumentParser
import Foundation
import MentoryClient
import MentoryDomain
import MentoryWire

struct DiaryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diary",
        abstract: "Write, read and manage diary entries.",
        subcommands: [
            Add.self, Get.self, List.self, Delete.self, SuggestionDone.self, DiaryExport.self, DiaryImport.self,
        ]
    )

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add the entry for a day.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Option(help: "One of: \(EmotionArgument.allCases.map(\.rawValue).joined(separator: ", ")).")
        var emotion: EmotionArgument

        @Option(help: "The entry's title.")
        var title: String

        @Option(help: "The entry's text.")
        var text: String

        @Option(help: "The day the entry is about, YYYY-MM-DD (default: today).")
        var date: String?

        @Option(help: "An analysis of the entry.")
        var analysis: String?

        @Option(name: .customLong("suggestion"), help: "An action item; repeat for several.")
        var suggestions: [String] = []

        func validate() throws {
            if let date, CalendarDay(date) == nil {
                throw ValidationError("--date must be a real day written YYYY-MM-DD, not '\(date)'")
            }
        }

        func run() throws {
            try self.options.withConnection { client in
                var request = Mentory_V1_DiaryAddRequest()
                request.recordDate = self.date ?? Self.today()
                request.title = self.title
                request.text = self.text
                request.emotion = self.emotion.wire
                if let analysis { request.analysis = analysis }
                request.actionItems = self.suggestions.map { text in
                    var item = Mentory_V1_ActionItem()
                    item.text = text
                    return item
                }
                printEntry(try client.diaryAdd(request), json: self.options.json)
            }
        }

        static func today() -> String {
            let parts = Calendar(identifier: .gregorian).dateComponents([.year, .month, .day], from: Date())
            return CalendarDay(year: parts.year!, month: parts.month!, day: parts.day!)!.description
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Show one entry.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Argument(help: "The entry's id.")
        var id: String

        func run() throws {
            try self.options.withConnection { client in
                printEntry(try client.diaryGet(id: self.id), json: self.options.json)
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List entries, newest day first.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Option(help: "At most this many entries (1-1000).")
        var limit: UInt32 = 50

        func validate() throws {
            guard (1...1000).contains(self.limit) else {
                throw ValidationError("--limit must be between 1 and 1000")
            }
        }

        @Option(help: "Only days before this one, YYYY-MM-DD.")
        var before: String?

        func run() throws {
            try self.options.withConnection { client in
                // Pages through the daemon's cursor: large entries may not all fit one reply.
                let entries = try client.diaryList(limit: self.limit, before: self.before)
                if self.options.json {
                    var reply = Mentory_V1_DiaryListReply()
                    reply.entries = entries
                    if entries.count == Int(self.limit), let last = entries.last {
                        reply.nextBefore = last.recordDate
                    }
                    Output.printJSON(reply)
                } else if entries.isEmpty {
                    print("No entries.")
                } else {
                    entries.forEach { print(Formatting.entrySummary($0)) }
                }
            }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete an entry.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Argument(help: "The entry's id.")
        var id: String

        func run() throws {
            try self.options.withConnection { client in
                let deleted = try client.diaryDelete(id: self.id)
                if self.options.json {
                    Output.printJSON(deleted)
                } else {
                    print("Deleted \(Formatting.entrySummary(deleted))")
                }
            }
        }
    }

    struct SuggestionDone: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "suggestion-done",
            abstract: "Tick off (or, with --undo, untick) one of an entry's action items."
        )
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Argument(help: "The entry's id.")
        var entryID: String

        @Argument(help: "The action item's id.")
        var suggestionID: String

        @Flag(help: "Mark the item not done.")
        var undo = false

        func run() throws {
            try self.options.withConnection { client in
                let entry = try client.diarySetSuggestionDone(
                    entryID: self.entryID,
                    suggestionID: self.suggestionID,
                    done: !self.undo
                )
                printEntry(entry, json: self.options.json)
            }
        }
    }
}

private func printEntry(_ entry: Mentory_V1_DiaryEntry, json: Bool) {
    if json {
        Output.printJSON(entry)
    } else {
        print(Formatting.entry(entry))
    }
}
