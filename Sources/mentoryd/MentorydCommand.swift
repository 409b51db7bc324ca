import ArgumentParser
import Configuration
import Foundation
import Logging
import SystemPackage

/// The `mentoryd` command line.
@main
struct MentorydCommand: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "mentoryd",
        abstract: "The Mentory session daemon: mentor messages, reachability and diary entries over a Unix socket.",
        discussion: """
            Settings come from, highest first: these flags, MENTORYD_* environment variables \
            (e.g. MENTORYD_SOCKET_PATH, MENTORYD_LOG_LEVEL), the config file, and embedded defaults. \
            No config file is needed.
            """,
        version: version
    )

    @Option(name: .customLong("socket"), help: "The Unix socket path to bind.")
    var socketPath: String?

    @Option(name: .customLong("state-dir"), help: "The directory for persistent state.")
    var stateDirectory: String?

    @Option(
        name: .customLong("config"),
        help: "A JSON config file (default: $MENTORYD_CONFIG, else /etc/mentoryd/mentoryd.json if it exists)."
    )
    var configFile: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    @Option(name: .customLong("max-frame-length"), help: "The largest frame payload accepted, in bytes.")
    var maxFrameLength: Int?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let bootstrapLogger = Logger(label: "mentoryd")
        let settings: DaemonSettings
        do {
            let reader = try await self.configReader(environment: environment)
            settings = try DaemonSettings(config: reader, environment: environment)
        } catch {
            bootstrapLogger.critical("cannot read the configuration: \(error)")
            throw ExitCode(78)  // EX_CONFIG
        }
        var logger = Logger(label: "mentoryd")
        logger.logLevel = settings.logLevel
        let daemon = Daemon(settings: settings, version: Self.version, logger: logger)
        do {
            try await daemon.run()
        } catch {
            logger.critical("mentoryd stopped: \(error)")
            throw ExitCode.failure
        }
    }

    /// Flags over environment over config file; embedded defaults live in ``DaemonSettings``.
    private func configReader(environment: [String: String]) async throws -> ConfigReader {
        var flags: [AbsoluteConfigKey: ConfigValue] = [:]
        if let socketPath { flags["socket.path"] = .init(.string(socketPath), isSecret: false) }
        if let stateDirectory { flags["state.directory"] = .init(.string(stateDirectory), isSecret: false) }
        if let logLevel { flags["log.level"] = .init(.string(logLevel), isSecret: false) }
        if let maxFrameLength { flags["limits.maxFrameLength"] = .init(.int(maxFrameLength), isSecret: false) }
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "flags", values: flags),
            EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: "mentoryd"),
        ]
        if let explicit = self.configFile ?? environment["MENTORYD_CONFIG"] {
            providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(explicit)))
        } else {
            providers.append(
                try await FileProvider<JSONSnapshot>(filePath: "/etc/mentoryd/mentoryd.json", allowMissing: true)
            )
        }
        return ConfigReader(providers: providers)
    }
}
