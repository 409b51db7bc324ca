import Foundation
import ArgumentParser
import MentoryClient
import MentoryWire

struct Ping: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping", abstract: "Check that the daemon answers, and how fast.")

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    func run() throws {
        try Self.run(self.options)
    }

    /// The command, with its options however they were parsed (see ``FastPath``).
    static func run(_ options: some ClientSettings) throws {
        try options.withConnection(pipelined: false) { client in
            let clock = ContinuousClock()
            let elapsed = try clock.measure { try client.ping() }
            let microseconds = Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
            if options.json {
                print(
                    #"{"ok":true,"serverVersion":"\#(client.welcome.serverVersion)","roundTripMicroseconds":\#(Int(microseconds))}"#
                )
            } else {
                print("pong from mentoryd \(client.welcome.serverVersion) in \(Int(microseconds)) µs")
            }
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon's version, uptime, connections, handlers and subscribers."
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    func run() throws {
        try Self.run(self.options)
    }

    /// Whose daemon answered: `user instance of alice (uid 1001)`, or `system instance, shared; runs as mentory (uid 998)`.
    static func describe(_ instance: Mentory_V1_DaemonInstance) -> String {
        let account =
            instance.userName.isEmpty ? "uid \(instance.uid)" : "\(instance.userName) (uid \(instance.uid))"
        switch instance.kind {
        case .user: return "user instance of \(account)"
        case .system: return "system instance, shared; runs as \(account)"
        default: return "instance of unknown kind \(instance.kind.rawValue); runs as \(account)"
        }
    }

    /// The command, with its options however they were parsed (see ``FastPath``).
    static func run(_ options: some ClientSettings) throws {
        try options.withConnection { client in
            let status = try client.status()
            if options.json {
                Output.printJSON(status)
                return
            }
            print("mentoryd \(status.serverVersion)")
            if status.hasInstance { print("instance:    \(Self.describe(status.instance))") }
            print("uptime:      \(Int(status.uptimeSeconds)) s")
            print("connections: \(status.connections)")
            print("subscribers: \(status.subscribers)")
            print("epoch:       \(status.epoch)")
            print("handlers:")
            for handler in status.handlers {
                print("  \(handler.namespace): \(handler.methods.joined(separator: ", "))")
            }
            print("topics:")
            for topic in status.topics {
                print("  \(topic.topic) at #\(topic.sequence)")
            }
            if !status.plugins.isEmpty {
                print("plugins:")
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                for plugin in status.plugins {
                    let state: String
                    switch plugin.state {
                    case .connected: state = "connected"
                    case .failed: state = "failed"
                    default: state = "waiting"
                    }
                    let seconds = max(0, now - plugin.sinceUnixMs) / 1000
                    let reason = plugin.reason.isEmpty ? "" : " (\(plugin.reason))"
                    print(
                        "  \(plugin.name) (\(plugin.namespace)): \(state) for \(seconds) s\(reason),"
                            + " \(plugin.callsInFlight) calls in flight")
                }
            }
            if let metrics = try? client.metrics() { UIDBudgetBlock(metrics).print() }
        }
    }
}

/// The per-uid budget block of `mentoryctl status`, read from the daemon's `mentoryd_uid_*` gauges: each uid with
/// a connection open, what its connections hold together against the budget.
struct UIDBudgetBlock {
    private var limits: [String: Double] = [:]
    private var usage: [String: [String: Double]] = [:]

    init(_ metrics: Mentory_V1_MetricsReply) {
        for family in metrics.families {
            for sample in family.samples {
                let labels = Dictionary(sample.labels.map { ($0.name, $0.value) }) { first, _ in first }
                if family.name == "mentoryd_uid_budget_limit", let budget = labels["budget"] {
                    self.limits[budget] = sample.value
                } else if family.name.hasPrefix("mentoryd_uid_"), let uid = labels["uid"] {
                    self.usage[uid, default: [:]][String(family.name.dropFirst("mentoryd_uid_".count))] = sample.value
                }
            }
        }
    }

    func print() {
        guard !self.usage.isEmpty else { return }
        Swift.print(
            "budgets per uid (used/limit; all uids: \(Self.bytes(self.limits["total_queued_bytes"])) queued at most):")
        for uid in self.usage.keys.sorted(by: { (UInt32($0) ?? 0) < (UInt32($1) ?? 0) }) {
            let used = self.usage[uid]!
            func pair(_ key: String, _ limit: String) -> String {
                "\(Int(used[key] ?? 0))/\(self.limits[limit].map { "\(Int($0))" } ?? "?")"
            }
            Swift.print(
                "  uid \(uid): connections \(pair("connections", "connections")),"
                    + " requests in flight \(pair("requests_in_flight", "requests_in_flight")),"
                    + " queued \(Self.bytes(used["queued_bytes"]))/\(Self.bytes(self.limits["queued_bytes"])),"
                    + " subscriptions \(pair("subscriptions", "subscriptions"))")
        }
    }

    private static func bytes(_ value: Double?) -> String {
        guard let value else { return "?" }
        if value >= 1_048_576 { return String(format: "%.1f MiB", value / Double(1 << 20)) }
        if value >= 1024 { return String(format: "%.1f KiB", value / Double(1 << 10)) }
        return "\(Int(value)) B"
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Stream events until interrupted, across daemon restarts.",
        discussion: """
            The default topics, and the messages their events carry, come from the daemon's \
            session.describe, so topics of namespaces this mentoryctl was not built with are decoded \
            too (--json, or as JSON after the event's header). Each topic starts with a snapshot of \
            its current state, or, with --from, with the events after that sequence number. When the \
            connection drops, watch reconnects and resumes where it stopped; when the daemon cannot \
            replay what was missed (it restarted, or too much happened) a reset event carries the whole \
            current state instead. When the daemon is not running yet, watch waits for it if topics are \
            named. When the daemon ends a subscription (a reload took away the right to read its topic), \
            watch says why and exits with status 1.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Argument(help: "Topics to watch (default: every topic the daemon describes).")
    var topics: [String] = []

    @Option(help: "Resume every watched topic after this sequence number.")
    var from: UInt64?

    @Option(help: "The epoch --from belongs to (default: the running daemon's).")
    var epoch: UInt64?

    @Option(help: "Stop after this many events (default: run until interrupted).")
    var count: Int?

    func run() async throws {
        // The topics and the messages their events carry come from the daemon's session.describe.
        // A daemon that cannot be reached yet is waited for like a lost one, when the topics are
        // named: their events are then decoded once it answers describe.
        var schema = try DaemonSchema.builtIn()
        var described = false
        var epoch = self.epoch
        do {
            let client = try await self.options.connect()
            do {
                schema = try await DaemonSchema.fetch(client)
                described = true
                if epoch == nil { epoch = client.welcome.epoch }
                await client.close()
            } catch {
                await client.close()
                throw error
            }
        } catch let error as MentoryClientError where error.isUnreachable && !self.topics.isEmpty && self.from == nil {
            Output.error("\(error.description); waiting for it")
        } catch {
            throw ClientOptions.fail(error, json: self.options.json)
        }
        let topics = self.topics.isEmpty ? schema.topics.map(\.name) : self.topics
        guard !topics.isEmpty else {
            Output.error("the daemon describes no topics")
            throw ExitCode.failure
        }
        var cursors: [String: TopicCursor] = [:]
        if let from = self.from {
            for topic in topics {
                cursors[topic] = TopicCursor(epoch: epoch ?? 0, sequence: from)
            }
        }
        let socketPath: String
        do {
            socketPath = try self.options.resolvedSocketPath()
        } catch {
            Output.error(error.description)
            throw ExitCode(69)
        }
        let updates = MentoryClient.resumableSubscription(
            socketPath: socketPath,
            clientName: "mentoryctl watch",
            topics: topics,
            from: cursors
        )
        var seen = 0
        do {
            for try await update in updates {
                switch update {
                case .event(let event) where event.kind == .ended:
                    // The daemon ended the subscription (a reload took away the right to read the topic): what
                    // it says is final, so watching stops rather than resubscribing to be refused.
                    Output.error("the subscription to \(event.topic) ended: \(event.error.message)")
                    throw ExitCode.failure
                case .event(let event):
                    // Unbuffered, so scripts reading through a pipe see each event as it happens.
                    Output.line(
                        self.options.json
                            ? Output.eventJSON(event, schema: schema) : Formatting.event(event, schema: schema))
                    seen += 1
                    if let count = self.count, seen >= count { return }
                case .connected(let epoch):
                    if !described, let client = try? await self.options.connect() {
                        if let fetched = try? await DaemonSchema.fetch(client) {
                            schema = fetched
                            described = true
                        }
                        await client.close()
                    }
                    Output.error("watching \(topics.joined(separator: ", ")) (epoch \(epoch))")
                case .disconnected(let reason):
                    Output.error("disconnected (\(reason)); reconnecting")
                case .overflowed(let limit):
                    Output.error("fell more than \(limit) events behind; resuming (a reset may follow)")
                }
            }
        } catch let error as MentoryClientError {
            Output.error(error.description)
            if case .untrustedSocket = error { throw ExitCode(69) }
            throw ExitCode.failure
        } catch let exit as ExitCode {
            throw exit
        } catch {
            Output.error("\(error)")
            throw ExitCode.failure
        }
    }
}
