import ArgumentParser
import MentoryCommandLine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The `mentoryctl` command tree.
@main
struct Mentoryctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mentoryctl",
        abstract: "Talk to mentoryd: mentor messages, reachability, diary entries and live events.",
        discussion: """
            The daemon's socket is found without configuration: your own instance \
            ($XDG_RUNTIME_DIR/mentoryd/mentoryd.sock), then the shared system instance \
            (/run/mentoryd/mentoryd.sock), then /tmp/mentoryd-UID/mentoryd.sock, skipping one you may not \
            connect to while another exists; --socket or MENTORY_SOCKET override it. A socket is used only if its directory is owned by you, root or the \
            daemon user (mentory, or $MENTORY_DAEMON_USER) and not writable by others, and the process \
            serving it runs as one of them. --socket, --json and --timeout may come before or after the \
            subcommand. Exit status: 0 on success, 1 when the daemon answers with an error, 69 when it \
            cannot be reached or its socket is refused as untrusted, 64 for a usage error.
            """,
        version: MentoryVersion.current,
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

    /// The global options: written before or after the subcommand, read by every subcommand.
    @OptionGroup(title: "Global options") var options: ClientOptions

    /// Runs the process's command line, then exits; a failure is printed as the parser prints it.
    static func main() async {
        // libdispatch renices its worker threads after their QoS class, which an ordinary user may not
        // do, and says so through syslog into the journal ("Failed to set thread priority for worker
        // thread"). It reads LIBDISPATCH_LOG at its first log line, not at start, so this comes in time.
        // The unit files set the same for the daemon and the plugins.
        setenv("LIBDISPATCH_LOG", "NO", 0)
        do {
            try await self.run(Array(CommandLine.arguments.dropFirst()))
        } catch {
            self.exit(withError: error)
        }
    }

    /// Runs the command `arguments` (a command line without the program's name) names: through
    /// ``FastPath`` when it is one of the plainest, else as the parser reads it.
    ///
    /// One-shot commands are plain `ParsableCommand`s: they run synchronously here, on the calling thread
    /// (this function runs on its caller's executor: from ``main()``, the main thread), over a
    /// ``BlockingMentoryConnection``, so the process starts no thread at all. Only the commands that stream
    /// (`AsyncParsableCommand`s: watch, monitor, export...) await, and start the event loop.
    nonisolated(nonsending) static func run(_ arguments: [String]) async throws {
        if let (run, settings) = FastPath.match(arguments) {
            try run(settings)
            return
        }
        var command = try self.parseAsRoot(arguments)
        if var streaming = command as? any AsyncParsableCommand {
            try await streaming.run()
        } else {
            try command.run()
        }
    }
}

/// The plainest spellings of the most used one-shot commands, recognized without the argument parser.
///
/// swift-argument-parser's generic parse (reflection over every command, dynamic casts that scan the
/// binary's protocol conformances) costs a short command more than its call to the daemon. A command line
/// that ``PlainCommandLine`` reads as exactly the words of one of ``commands`` and the global options, in
/// any order, runs that command directly with the same code the parsed command runs. Anything else goes
/// to the parser, which accepts it or says what is wrong.
enum FastPath {
    typealias Run = @Sendable (PlainClientSettings) throws -> Void

    /// The commands taken here: each takes only the global options.
    static let commands: [(path: [String], run: Run)] = [
        (["ping"], { try Ping.run($0) }),
        (["status"], { try Status.run($0) }),
        (["mentor", "get"], { try MentorCommand.Get.run($0) }),
        (["reachability", "get"], { try ReachabilityCommand.Get.run($0) }),
    ]

    /// The global options (``ClientOptions``) in their plainest form.
    static let globalOptions = PlainCommandLine(options: [.valued("--socket"), .flag("--json"), .valued("--timeout")])

    /// The command and its options when `arguments` are in the plain form described on the type; `nil`
    /// otherwise.
    static func match(_ arguments: [String]) -> (Run, PlainClientSettings)? {
        guard
            let reading = self.globalOptions.read(arguments),
            let command = self.commands.first(where: { $0.path == reading.operands })
        else { return nil }
        var settings = PlainClientSettings(socket: reading["--socket"], json: reading.isSet("--json"))
        if let timeout = reading["--timeout"] {
            guard let seconds = Double(timeout) else { return nil }
            settings.timeout = seconds
        }
        return (command.run, settings)
    }
}
