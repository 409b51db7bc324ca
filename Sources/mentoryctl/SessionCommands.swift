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
                print(#"{"ok":true,"serverVersion":"\#(client.welcome.serverVersion)","roundTripMicroseconds":\#(Int(microseconds))}"#)
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
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream events until interrupted.",
        discussion: "Each topic starts with a snapshot of its current state; changes follow as they happen."
    )

    @OptionGroup var options: ClientOptions

    @Argument(help: "Topics to watch: mentor, reachability, diary (default: all).")
    var topics: [String] = []

    @Option(help: "Stop after this many events (default: run until interrupted).")
    var count: Int?

    func run() async throws {
        try await self.options.withClient { client in
            let topics = self.topics.isEmpty ? [WireNames.mentor, WireNames.reachability, WireNames.diary] : self.topics
            _ = try await client.subscribe(topics: topics)
            var seen = 0
            for await event in client.events {
                if self.options.json {
                    print(Output.eventJSON(event))
                } else {
                    print(Formatting.event(event))
                }
                seen += 1
                if let count = self.count, seen >= count { return }
            }
            throw MentoryClientError.connectionClosed(reason: "the daemon closed the connection")
        }
    }
}
