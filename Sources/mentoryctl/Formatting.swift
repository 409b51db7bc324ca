import Foundation
import MentoryDescriptors
import MentoryDomain
import MentoryWire

/// Human-readable renderings of daemon replies.
enum Formatting {
    static func time(_ unixMilliseconds: Int64) -> String {
        guard unixMilliseconds > 0 else { return "-" }
        let date = Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000)
        return date.formatted(.iso8601)
    }

    static func character(_ character: Mentory_V1_MentorCharacter) -> String {
        switch character {
        case .cool: "cool"
        case .warm: "warm"
        default: "unspecified"
        }
    }

    static func items(_ items: [Mentory_V1_ActionItem], indent: String = "  ") -> [String] {
        items.map { "\(indent)[\($0.done ? "x" : " ")] \($0.text)  (\($0.id))" }
    }

    static func mentor(_ state: Mentory_V1_MentorState) -> String {
        guard state.hasMessage else { return "No mentor message yet." }
        let message = state.message
        var lines = ["\(self.character(message.character)) mentor, updated \(self.time(message.updatedAtUnixMs))"]
        lines.append(message.content)
        lines += self.items(message.actionItems)
        return lines.joined(separator: "\n")
    }

    static func peer(_ peer: Mentory_V1_PeerState) -> String {
        func flag(_ value: Bool, _ yes: String, _ no: String) -> String { value ? yes : no }
        return [
            peer.peer,
            flag(peer.isPaired, "paired", "not paired"),
            flag(peer.isAppInstalled, "app installed", "app not installed"),
            flag(peer.isReachable, "reachable", "unreachable"),
            "updated \(self.time(peer.updatedAtUnixMs))",
        ].joined(separator: "  ")
    }

    static func entrySummary(_ entry: Mentory_V1_DiaryEntry) -> String {
        "\(entry.recordDate)  \(EmotionArgument(entry.emotion)?.rawValue ?? "?")  \(entry.title)  (\(entry.id))"
    }

    static func entry(_ entry: Mentory_V1_DiaryEntry) -> String {
        var lines = [self.entrySummary(entry), "created \(self.time(entry.createdAtUnixMs))", "", entry.text]
        if entry.hasAnalysis {
            lines += ["", "Analysis: \(entry.analysis)"]
        }
        if !entry.actionItems.isEmpty {
            lines += [""] + self.items(entry.actionItems)
        }
        return lines.joined(separator: "\n")
    }

    static func event(_ event: Mentory_V1_Event, schema: DaemonSchema) -> String {
        let kind =
            switch event.kind {
            case .snapshot: "snapshot"
            case .reset: "reset"
            default: "change"
            }
        let head = "[\(event.topic) #\(event.sequence) \(kind)]"
        switch event.topic {
        case WireNames.mentor:
            let state = (try? Mentory_V1_MentorState(serializedBytes: event.body)) ?? .init()
            return head + " " + self.mentor(state).replacingOccurrences(of: "\n", with: "\n    ")
        case WireNames.reachability where event.kind == .change:
            let peer = (try? Mentory_V1_PeerState(serializedBytes: event.body)) ?? .init()
            return head + " " + self.peer(peer)
        case WireNames.reachability:
            let snapshot = (try? Mentory_V1_ReachabilitySnapshot(serializedBytes: event.body)) ?? .init()
            return ([head + " \(snapshot.peers.count) peer(s)"] + snapshot.peers.map { "    " + self.peer($0) })
                .joined(separator: "\n")
        case WireNames.diary where event.kind == .change:
            let change = (try? Mentory_V1_DiaryChange(serializedBytes: event.body)) ?? .init()
            switch change.change {
            case .added(let entry): return head + " added " + self.entrySummary(entry)
            case .updated(let entry): return head + " updated " + self.entrySummary(entry)
            case .deletedID(let id): return head + " deleted \(id)"
            case nil: return head
            }
        case WireNames.diary:
            let snapshot = (try? Mentory_V1_DiarySnapshot(serializedBytes: event.body)) ?? .init()
            return head + " \(snapshot.entries.count) entries"
        default:
            // A topic of a namespace this mentoryctl was not built with: its body as JSON.
            guard let body = schema.eventBodyJSON(event, options: JSONOutputOptions()) else {
                return head + " \(event.body.count) bytes"
            }
            return head + " " + body
        }
    }
}
