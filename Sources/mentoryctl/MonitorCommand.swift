#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif
import ArgumentParser
import MentoryClient
import MentoryWire

/// `mentoryctl monitor`: every request, reply and event, live.
struct Monitor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Show every request, reply and event the daemon handles, live (root only by default).",
        discussion: """
            One line per answered request (the caller's connection, uid, pid and client name, the \
            method, the result code, the latency and the request and reply sizes), per topic state \
            taken for a subscriber's snapshot or reset (the subscriber, the topic, its publisher, the \
            result code and the size) and per published event (topic, sequence number, size). A monitor that falls behind never slows the daemon: \
            it loses records and is told how many (a "missed" line). --namespace and --topic narrow \
            what is shown; --json prints one JSON object per line. Runs until interrupted.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Option(name: .customLong("namespace"), help: "Only requests to this namespace (repeatable).")
    var namespaces: [String] = []

    @Option(name: .customLong("topic"), help: "Only events on this topic (repeatable).")
    var topics: [String] = []

    func run() async throws {
        try await self.options.withClient { client in
            var request = Mentory_V1_MonitorRequest()
            request.namespaces = self.namespaces
            request.topics = self.topics
            _ = try await client.call(MentorySchema.Session.monitor, request)
            for await event in client.events where event.topic == "session.monitor" {
                guard let record = try? Mentory_V1_MonitorRecord(serializedBytes: event.body) else { continue }
                if self.options.json {
                    Output.printJSON(record)
                } else {
                    print(Self.line(record))
                }
                // Live output: each line as it happens, also into a pipe.
                fflush(nil)
            }
        }
    }

    /// One record as a line for a person.
    static func line(_ record: Mentory_V1_MonitorRecord) -> String {
        let time = Self.time(record.unixMs)
        switch record.what {
        case .call(let call):
            let peer = call.hasUid ? "uid \(call.uid) pid \(call.pid)" : "uid ? pid ?"
            let result =
                call.code == 0
                ? "OK" : (Mentory_V1_ErrorCode(rawValue: Int(call.code)).map { "\($0)" } ?? "error \(call.code)")
            let what =
                if !call.topic.isEmpty {
                    "\(call.namespace) state of \(call.topic) (for a subscriber's snapshot or reset)"
                } else if !call.chain.isEmpty {
                    "\(call.chain) (on the client's behalf)"
                } else {
                    "\(call.namespace).\(call.method)"
                }
            return "\(time) call  #\(call.connection) \(peer) \(call.clientName)  \(what)"
                + " id \(call.requestID)  \(result)  \(call.latencyUs) µs  \(call.requestBytes) B -> \(call.replyBytes) B"
        case .event(let event):
            return "\(time) event \(event.topic) #\(event.sequence)  \(event.bytes) B"
        case .missed(let missed):
            return "\(time) missed \(missed) record\(missed == 1 ? "" : "s"): this monitor fell behind"
        case nil:
            return "\(time) (empty record)"
        }
    }

    private static func time(_ unixMilliseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(unixMilliseconds) / 1000)
        return date.formatted(.iso8601.time(includingFractionalSeconds: true))
    }
}
