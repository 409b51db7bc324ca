import ArgumentParser

/// The `mentoryctl` command tree.
@main
struct Mentoryctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mentoryctl",
        abstract: "Talk to mentoryd: mentor messages, reachability, diary entries and live events.",
        discussion: """
            The daemon's socket is found without configuration; --socket or MENTORY_SOCKET override it. \
            Every command takes --json for machine-readable output. Exit status: 0 on success, 1 when \
            the daemon answers with an error, 69 when it cannot be reached, 64 for a usage error.
            """,
        version: "0.1.0",
        subcommands: [
            Ping.self,
            Status.self,
            MentorCommand.self,
            ReachabilityCommand.self,
            DiaryCommand.self,
            Watch.self,
            Backup.self,
            Reload.self,
        ]
    )
}
