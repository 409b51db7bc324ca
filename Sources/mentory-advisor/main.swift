import ArgumentParser
import Foundation
import Logging
import MentoryAdvisor
import MentoryClient
import MentoryDomain
import MentorySystemd
import MentoryWire

/// The reference mentoryd plugin: serves namespace `advisor` (docs/PLUGINS.md).
@main
struct MentoryAdvisorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mentory-advisor",
        abstract: "Serve mentoryd's `advisor` namespace: emotion advice with a fallback, offline."
    )

    @Option(
        help: """
            The daemon's socket (default: $MENTORY_SOCKET, else the first trusted one of \
            $XDG_RUNTIME_DIR/mentoryd/mentoryd.sock, \(DefaultPaths.systemSocketPath), as mentoryctl finds it).
            """)
    var socket: String?

    @Option(help: "The mentor's character: warm or cool.")
    var character: String = "warm"

    @Option(help: "The analysis' time budget in milliseconds; past it the emotion's default message answers.")
    var budgetMilliseconds: Int = 500

    @Option(help: "Where to keep the diary position (default: $STATE_DIRECTORY/diary-position, else none).")
    var stateFile: String?

    func run() async throws {
        // Under systemd (stderr is the journal) each line goes to the journal with its priority, as the
        // daemon's do; else to stderr.
        let environment = ProcessInfo.processInfo.environment
        LoggingSystem.bootstrap(
            SystemdLogging.handlerFactory(
                syslogIdentifier: "mentory-advisor",
                level: DynamicLogLevel(.info),
                destination: SystemdLogging.destination(environment: environment)
            ),
            metadataProvider: nil
        )
        let logger = Logger(label: "mentory-advisor")
        let character: Mentory_V1_MentorCharacter
        switch self.character.lowercased() {
        case "warm": character = .warm
        case "cool": character = .cool
        default: throw ValidationError("--character must be warm or cool, not '\(self.character)'")
        }
        let latest = LatestAdvice()
        let routes = AdvisorRules.routes(
            character: character, budget: .milliseconds(max(1, self.budgetMilliseconds)), latest: latest,
            onFallback: { reason in
                logger.notice("answered with the fallback message: \(reason)", metadata: ["reason": "\(reason)"])
            }
        )
        let socketPath = try SocketLocator.locate(explicit: self.socket, environment: environment)
        let plugin = try MentoryPlugin(socketPath: socketPath, clientName: "mentory-advisor", routes: routes)
        let states = Task {
            for await state in plugin.states {
                logger.info("\(Self.describe(state, socketPath: socketPath))", metadata: ["state": "\(state)"])
            }
        }
        defer { states.cancel() }
        // Each advice given goes out on the `advice` topic; one given while not registered is in the
        // snapshot the daemon asks for when the advisor registers again.
        let publishing = Task {
            for await advice in latest.given {
                try? await plugin.publish(MentoryAdvisorSchema.Advisor.adviceTopic, advice)
            }
        }
        defer { publishing.cancel() }
        let stateFile = self.stateFile ?? environment["STATE_DIRECTORY"].map { $0 + "/diary-position" }
        let watcher = DiaryWatcher(
            socketPath: socketPath, character: character, stateFile: stateFile, logger: logger)
        let watching = Task {
            do {
                try await watcher.run()
            } catch {
                logger.error("stopped following the diary: \(error)", metadata: ["error": "\(error)"])
            }
        }
        defer { watching.cancel() }
        do {
            try await plugin.run()
        } catch {
            logger.error(
                """
                mentoryd refused the advisor: \(error); exiting with status 77, after which systemd does not \
                restart it: fix the cause, then start its unit again
                """,
                metadata: ["error": "\(error)"])
            throw ExitCode(77)
        }
    }

    /// A plugin state as a journal line says it, the essentials in the message.
    static func describe(_ state: MentoryPlugin<MentoryAdvisorSchema.Advisor>.State, socketPath: String) -> String {
        switch state {
        case .connecting: "connecting to mentoryd at \(socketPath)"
        case .registered(let epoch): "registered as namespace advisor with mentoryd at \(socketPath) (epoch \(epoch))"
        case .waiting(let reason): "not registered with mentoryd, retrying: \(reason)"
        }
    }
}
