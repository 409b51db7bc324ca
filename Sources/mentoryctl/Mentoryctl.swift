import ArgumentParser

/// The `mentoryctl` command tree.
@main
struct Mentoryctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mentoryctl",
        abstract: "Talk to mentoryd: mentor messages, reachability, diary entries and live events.",
        discussion: """
            The daemon's socket is found without configuration (/run/mentoryd/mentoryd.sock, then \
            $XDG_RUNTIME_DIR/mentoryd/mentoryd.sock, then /tmp/mentoryd-UID/mentoryd.sock); --socket or \
            MENTORY_SOCKET override it. A socket is used only if its directory is owned by you, root or the \
            daemon user (mentory, or $MENTORY_DAEMON_USER) and not writable by others, and the process \
            serving it runs as one of them. --socket, --json and --timeout may come before or after the \
            subcommand. Exit status: 0 on success, 1 when the daemon answers with an error, 69 when it \
            cannot be reached or its socket is refused as untrusted, 64 for a usage error.
            """,
        version: "0.1.0",
        subcommands: [
            Ping.self,
            Status.self,
            Metrics.self,
            Monitor.self,
            MentorCommand.self,
            ReachabilityCommand.self,
            DiaryCommand.self,
            Watch.self,
            Describe.self,
            Call.self,
            Backup.self,
            Reload.self,
        ]
    )

    /// Parses with the global options allowed before the subcommand, then runs.
    ///
    /// One-shot commands are plain `ParsableCommand`s: they run synchronously here, on the main thread,
    /// over a ``BlockingMentoryConnection``, so the process starts no thread at all. Only the commands that
    /// stream (`AsyncParsableCommand`s: watch, monitor, export...) await, and start the event loop.
    static func main() async {
        do {
            var command = try self.parseAsRoot(GlobalOptions.reorder(Array(CommandLine.arguments.dropFirst())))
            if var streaming = command as? any AsyncParsableCommand {
                try await streaming.run()
            } else {
                try command.run()
            }
        } catch {
            self.exit(withError: error)
        }
    }
}
