import ArgumentParser

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
        // libdispatch renices its worker threads after their QoS class, which an ordinary user may not
        // do, and says so through syslog into the journal ("Failed to set thread priority for worker
        // thread"). It reads LIBDISPATCH_LOG at its first log line, not at start, so this comes in time.
        // The unit files set the same for the daemon and the plugins.
        setenv("LIBDISPATCH_LOG", "NO", 0)
        let arguments = GlobalOptions.reorder(Array(CommandLine.arguments.dropFirst()))
        do {
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
        } catch {
            self.exit(withError: error)
        }
    }
}

/// The plainest spellings of the most used one-shot commands, recognized without the argument parser.
///
/// swift-argument-parser's generic parse (reflection over every command, dynamic casts that scan the
/// binary's protocol conformances) costs a short command more than its call to the daemon. A command line
/// that is exactly one of ``commands`` followed by global options, each at most once and in the forms
/// `--json`, `--socket PATH`, `--socket=PATH`, `--timeout SECONDS` or `--timeout=SECONDS`, runs that
/// command directly with the same code the parsed command runs. Anything else (help, a repeated or
/// unknown option, a bad value, `--`) goes to the parser, which accepts it or says what is wrong.
enum FastPath {
    typealias Run = @Sendable (PlainClientSettings) throws -> Void

    /// The commands taken here: each takes only the global options.
    static let commands: [(path: [String], run: Run)] = [
        (["ping"], { try Ping.run($0) }),
        (["status"], { try Status.run($0) }),
        (["mentor", "get"], { try MentorCommand.Get.run($0) }),
        (["reachability", "get"], { try ReachabilityCommand.Get.run($0) }),
    ]

    /// The command and its options when `arguments` (with the global options already moved after the
    /// subcommand) are in the plain form described on the type; `nil` otherwise.
    static func match(_ arguments: [String]) -> (Run, PlainClientSettings)? {
        guard
            let command = self.commands.first(where: { arguments.starts(with: $0.path) }),
            let settings = self.settings(arguments.dropFirst(command.path.count))
        else { return nil }
        return (command.run, settings)
    }

    private static func settings(_ words: ArraySlice<String>) -> PlainClientSettings? {
        var settings = PlainClientSettings()
        var seen: [String] = []
        var index = words.startIndex
        while index < words.endIndex {
            let word = words[index]
            index += 1
            var name = word
            var value: String?
            if let equals = word.firstIndex(of: "=") {
                name = String(word[..<equals])
                value = String(word[word.index(after: equals)...])
            }
            guard !seen.contains(name) else { return nil }
            seen.append(name)
            if name == "--json", value == nil {
                settings.json = true
                continue
            }
            guard name == "--socket" || name == "--timeout" else { return nil }
            if value == nil, index < words.endIndex {
                value = words[index]
                index += 1
            }
            // A missing value, or one the parser could take for an option, is left to the parser.
            guard let value, !value.isEmpty, !value.hasPrefix("-") else { return nil }
            if name == "--socket" {
                settings.socket = value
            } else {
                guard let seconds = Double(value) else { return nil }
                settings.timeout = seconds
            }
        }
        return settings
    }
}
