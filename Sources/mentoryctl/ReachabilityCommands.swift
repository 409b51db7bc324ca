import ArgumentParser
import MentoryClient
import MentoryDomain
import MentoryWire

struct ReachabilityCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reachability",
        abstract: "See and report whether companion devices are paired, have the app and are reachable.",
        subcommands: [Get.self, Report.self]
    )

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Show every peer's state.")
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        func run() throws {
            try Self.run(self.options)
        }

        /// The command, with its options however they were parsed (see ``FastPath``).
        static func run(_ options: some ClientSettings) throws {
            try options.withConnection { client in
                let snapshot = try client.reachabilityGet()
                if options.json {
                    Output.printJSON(snapshot)
                } else if snapshot.peers.isEmpty {
                    print("No peer has reported yet.")
                } else {
                    snapshot.peers.forEach { print(Formatting.peer($0)) }
                }
            }
        }
    }

    struct Report: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "report",
            abstract: "Report a peer's state.",
            discussion: """
                The daemon marks the peer unreachable when the reporting connection closes, so \
                'report' exits at once unless --hold keeps the connection open until interrupted.
                """
        )
        @ParentCommand var mentoryctl: Mentoryctl
        var options: ClientOptions { self.mentoryctl.options }

        @Argument(help: "The peer's name, e.g. phone or watch.")
        var peer: String

        @Option(help: "Whether the peer is paired.")
        var paired: Bool = true

        @Option(name: .customLong("app-installed"), help: "Whether the app is installed on the peer.")
        var appInstalled: Bool = true

        @Option(help: "Whether the peer is reachable.")
        var reachable: Bool = true

        @Flag(help: "Keep the connection (and so the peer's reachability) until interrupted.")
        var hold = false

        func run() async throws {
            try await self.options.withClient { client in
                var state = Mentory_V1_PeerState()
                state.peer = self.peer
                state.isPaired = self.paired
                state.isAppInstalled = self.appInstalled
                state.isReachable = self.reachable
                let stored = try await client.reachabilityReport(state)
                if self.options.json {
                    Output.printJSON(stored)
                } else {
                    print(Formatting.peer(stored))
                }
                if self.hold {
                    for await _ in client.events {}
                }
            }
        }
    }
}
