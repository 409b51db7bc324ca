import Foundation
import ArgumentParser
import MentoryClient
import MentoryWire

struct Ping: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check that the daemon answers, and how fast.")

    @OptionGroup var options: ClientOptions

    func run() async throws {
        try await self.options.withClient { client in
            let clock = ContinuousClock()
            let elapsed = try await clock.measure { try await client.ping() }
            let microseconds = Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
            if self.options.json {
                print(
                    #"{"ok":true,"serverVersion":"\#(client.welcome.serverVersion)","roundTripMicroseconds":\#(Int(microseconds))}"#
                )
            } else {
                print("pong from mentoryd \(client.welcome.serverVersion) in \(Int(microseconds)) µs")
            }
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the daemon's version, uptime, connections, handlers and subscribers."
    )

    @OptionGroup var options: ClientOptions

    func run() async throws {
        try await self.options.withClient { client in
            let status = try await client.status()
            if self.options.json {
                Output.printJSON(status)
                return
            }
            print("mentoryd \(status.serverVersion)")
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
                    let state = plugin.state == .connected ? "connected" : "waiting"
                    let seconds = max(0, now - plugin.sinceUnixMs) / 1000
                    print(
                        "  \(plugin.name) (\(plugin.namespace)): \(state) for \(seconds) s,"
                            + " \(plugin.callsInFlight) calls in flight")
                }
            }
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream events until interrupted, across daemon restarts.",
        discussion: """
            Each topic starts with a snapshot of its current state, or, with --from, with the \
            events after that sequence number. When the connection drops, watch reconnects and \
            resumes where it stopped; when the daemon cannot replay what was missed (it restarted, \
            or too much happened) a reset event carries the whole current state instead.
            """
    )

    @OptionGroup var options: ClientOptions

    @Argument(help: "Topics to watch: mentor, reachability, diary (default: all).")
    var topics: [String] = []

    @Option(help: "Resume every watched topic after this sequence number.")
    var from: UInt64?

    @Option(help: "The epoch --from belongs to (default: the running daemon's).")
    var epoch: UInt64?

    @Option(help: "Stop after this many events (default: run until interrupted).")
    var count: Int?

    func run() async throws {
        let topics = self.topics.isEmpty ? [WireNames.mentor, WireNames.reachability, WireNames.diary] : self.topics
        var cursors: [String: TopicCursor] = [:]
        if let from = self.from {
            var epoch = self.epoch
            if epoch == nil {
                try await self.options.withClient { client in epoch = client.welcome.epoch }
            }
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
                case .event(let event):
                    // Unbuffered, so scripts reading through a pipe see each event as it happens.
                    Output.line(self.options.json ? Output.eventJSON(event) : Formatting.event(event))
                    seen += 1
                    if let count = self.count, seen >= count { return }
                case .connected(let epoch):
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
        } catch {
            Output.error("\(error)")
            throw ExitCode.failure
        }
    }
}
