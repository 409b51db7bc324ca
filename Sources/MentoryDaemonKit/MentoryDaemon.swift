import ArgumentParser
import MentoryHandlerKit

/// Builds a mentoryd: the built-in handlers plus your own, with mentoryd's command line,
/// configuration, systemd integration and lifecycle.
///
/// A package that serves its own namespace needs a `main.swift` of a few lines:
///
/// ```swift
/// import GreeterHandler
/// import MentoryDaemonKit
///
/// await MentoryDaemon.main(adding: [GreeterHandler()])
/// ```
///
/// Each added handler is configured under `handlers.<namespace>` like the built-in ones: it can be
/// disabled (`enabled`), can require other namespaces (`requires`), and reads its own keys there.
public enum MentoryDaemon {
    /// The version mentoryd reports.
    public static var version: String { MentorydCommand.version }

    /// Parses the command line and runs the daemon until `SIGTERM`, then exits the process.
    ///
    /// - Parameter extraHandlers: Handlers served besides the built-in ones, each under its own namespace.
    public static func main(adding extraHandlers: [any MentoryHandler] = []) async -> Never {
        do {
            if let options = MentorydCommand.plain(Array(CommandLine.arguments.dropFirst())) {
                try await MentorydCommand.run(options, adding: extraHandlers)
                MentorydCommand.exit()
            }
            let command = try MentorydCommand.parseAsRoot()
            guard let daemon = command as? MentorydCommand else {
                // --help, --version and the like.
                var other = command
                if var asyncCommand = other as? any AsyncParsableCommand {
                    try await asyncCommand.run()
                } else {
                    try other.run()
                }
                MentorydCommand.exit()
            }
            try await daemon.run(adding: extraHandlers)
            MentorydCommand.exit()
        } catch {
            MentorydCommand.exit(withError: error)
        }
    }
}
