import ArgumentParser
import MentoryClient
import MentoryWire

/// `mentoryctl metrics`: the daemon's counters, gauges and histograms.
struct Metrics: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Show the daemon's metrics: requests, latency, connections, subscribers, storage.",
        discussion: """
            Requests are counted by namespace, method and result code (OK or the error code's name), \
            with a latency histogram per namespace; then connections, subscribers, resets, back-pressure \
            and the store's commits. --json prints the reply as one JSON object; --prometheus prints \
            the Prometheus text format (0.0.4) for node_exporter's textfile collector, e.g. \
            `mentoryctl metrics --prometheus > DIR/mentoryd.prom.tmp && mv DIR/mentoryd.prom.tmp \
            DIR/mentoryd.prom`. Every name starts with mentoryd_. Counters start at zero when the \
            daemon starts.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Flag(help: "Print the Prometheus text exposition format (0.0.4) instead of text.")
    var prometheus = false

    func validate() throws {
        if self.prometheus, self.options.json {
            throw ValidationError("choose one of --json and --prometheus")
        }
    }

    func run() throws {
        try self.options.withConnection { client in
            let reply = try client.metrics()
            if self.options.json {
                print(MetricsRendering.json(reply))
            } else if self.prometheus {
                print(MetricsRendering.prometheus(reply), terminator: "")
            } else {
                print(MetricsRendering.text(reply), terminator: "")
            }
        }
    }
}
