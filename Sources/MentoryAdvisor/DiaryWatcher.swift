import Foundation
import Logging
import MentoryClient
import MentoryDomain
import MentoryWire

/// Follows the `diary` topic and, when an entry for today is added and today has no mentor message
/// yet, sets one from the advisor's rules with `mentor.set`. It never overwrites a message set
/// today (by anyone), so there is at most one advice a day.
///
/// Its position (epoch and sequence of the last diary event handled) is saved to `stateFile` after
/// each event and resumed from at start, so across restarts of either side no entry is advised
/// twice and none is skipped: the daemon replays what followed, or sends a reset (which is never
/// advised on, as it is not a new entry).
public struct DiaryWatcher: Sendable {
    let socketPath: String
    let character: Mentory_V1_MentorCharacter
    let stateFile: String?
    let logger: Logger

    public init(socketPath: String, character: Mentory_V1_MentorCharacter, stateFile: String?, logger: Logger) {
        self.socketPath = socketPath
        self.character = character
        self.stateFile = stateFile
        self.logger = logger
    }

    /// Today's date in this process's time zone, as the diary writes it (YYYY-MM-DD).
    public static func today(_ date: Date = Date()) -> String {
        let parts = Calendar.current.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    /// Runs until cancelled.
    public func run() async throws {
        var cursors: [String: TopicCursor] = [:]
        if let saved = self.loadCursor() { cursors[WireNames.diary] = saved }
        let connection = MentoryConnection(socketPath: self.socketPath, clientName: "mentory-advisor-diary")
        let subscription = MentoryClient.resumableSubscription(
            socketPath: self.socketPath, clientName: "mentory-advisor-watch", topics: [WireNames.diary], from: cursors)
        for try await update in subscription {
            guard case .event(let event) = update else { continue }
            if event.kind == .change,
                let change = try? Mentory_V1_DiaryChange(serializedBytes: event.body),
                case .added(let entry) = change.change,
                entry.recordDate == Self.today()
            {
                await self.advise(on: entry, connection: connection)
            }
            self.saveCursor(TopicCursor(epoch: event.epoch, sequence: event.sequence))
        }
    }

    private func advise(on entry: Mentory_V1_DiaryEntry, connection: MentoryConnection) async {
        do {
            let client = try await connection.client()
            let current = try await client.mentorGet()
            if current.hasMessage,
                Self.today(Date(timeIntervalSince1970: Double(current.message.updatedAtUnixMs) / 1000)) == Self.today()
            {
                self.logger.info("today already has a mentor message; not overwriting it")
                return
            }
            let advice = AdvisorRules.advise(emotion: entry.emotion, text: entry.text, character: self.character)
            var request = Mentory_V1_MentorSetRequest()
            request.content = advice.content
            request.character = advice.character
            request.actionItems = advice.actionItems.map { text in
                var item = Mentory_V1_ActionItem()
                item.text = text
                return item
            }
            _ = try await client.mentorSet(request)
            self.logger.info("set today's mentor message", metadata: ["entry": "\(entry.id)"])
        } catch {
            self.logger.warning("could not set today's mentor message: \(error)", metadata: ["error": "\(error)"])
        }
    }

    private func loadCursor() -> TopicCursor? {
        guard let stateFile, let text = try? String(contentsOfFile: stateFile, encoding: .utf8) else { return nil }
        let parts = text.split(whereSeparator: \.isWhitespace).compactMap { UInt64($0) }
        guard parts.count == 2 else { return nil }
        return TopicCursor(epoch: parts[0], sequence: parts[1])
    }

    private func saveCursor(_ cursor: TopicCursor) {
        guard let stateFile else { return }
        let temporary = stateFile + ".tmp"
        do {
            try "\(cursor.epoch) \(cursor.sequence)\n".write(toFile: temporary, atomically: false, encoding: .utf8)
            _ = rename(temporary, stateFile)
        } catch {
            self.logger.warning("cannot save the diary position: \(error)", metadata: ["error": "\(error)"])
        }
    }
}
