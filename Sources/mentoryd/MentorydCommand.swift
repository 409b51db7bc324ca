import ArgumentParser
import Configuration
import Foundation
import Logging
import MentorySystemd
import SystemPackage

/// The `mentoryd` command line.
@main
struct MentorydCommand: AsyncParsableCommand {
    static let version = "0.1.0"

    /// `EX_CONFIG`: the configuration (or what systemd passed) cannot be used.
    static let configurationExitStatus: Int32 = 78

    static let configuration = CommandConfiguration(
        commandName: "mentoryd",
        abstract: "The Mentory session daemon: mentor messages, reachability and diary entries over a Unix socket.",
        discussion: """
            Settings come from, highest first: these flags, MENTORYD_* environment variables \
            (e.g. MENTORYD_SOCKET_PATH, MENTORYD_LOG_LEVEL), the config file, and embedded defaults. \
            No config file is needed.

            Under systemd it reports readiness, status and reloads with sd_notify, pings the \
            watchdog, adopts a socket passed by socket activation (exit status 66 if that socket \
            is not a listening Unix stream socket) and logs to the journal when stderr is the journal. \
            SIGHUP reloads the config file: the log level changes live; other changes are logged \
            and need a restart.
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
        let logLevel = DynamicLogLevel(.info)
        let destination = SystemdLogging.destination(environment: environment)
        LoggingSystem.bootstrap(
            SystemdLogging.handlerFactory(syslogIdentifier: "mentoryd", level: logLevel, destination: destination),
            metadataProvider: nil
        )
        let logger = Logger(label: "mentoryd")

        let source = SettingsSource(
            flags: self.flagValues,
            configFile: self.configFile ?? environment["MENTORYD_CONFIG"],
            environment: environment
        )
        let settings: DaemonSettings
        do {
            settings = try await source.load()
        } catch {
            logger.critical("cannot read the configuration: \(error)")
            throw ExitCode(Self.configurationExitStatus)
        }
        logLevel.level = settings.logLevel
        logger.debug("logging", metadata: ["destination": "\(destination.rawValue)"])

        let systemd: Daemon.Systemd
        do {
            systemd = try Daemon.Systemd(environment: environment)
        } catch let error as SocketActivationError {
            logger.critical("cannot adopt the activated socket: \(error)")
            throw ExitCode(SocketActivationError.exitStatus)
        } catch {
            logger.critical("cannot read what systemd passed: \(error)")
            throw ExitCode(Self.configurationExitStatus)
        }

        let daemon = Daemon(
            settings: settings,
            version: Self.version,
            logger: logger,
            logLevel: logLevel,
            systemd: systemd,
            reloadSettings: { try await source.load() }
        )
        do {
            try await daemon.run()
        } catch {
            logger.critical("mentoryd stopped: \(error)")
            throw ExitCode.failure
        }
    }

    /// The settings given as flags, as the highest-priority config provider sees them.
    private var flagValues: [AbsoluteConfigKey: ConfigValue] {
        var flags: [AbsoluteConfigKey: ConfigValue] = [:]
        if let socketPath { flags["socket.path"] = .init(.string(socketPath), isSecret: false) }
        if let stateDirectory { flags["state.directory"] = .init(.string(stateDirectory), isSecret: false) }
        if let logLevel { flags["log.level"] = .init(.string(logLevel), isSecret: false) }
        if let maxFrameLength { flags["limits.maxFrameLength"] = .init(.int(maxFrameLength), isSecret: false) }
        return flags
    }
}

/// Where the settings come from; read at start-up and again on every reload.
struct SettingsSource: Sendable {
    /// Values given as flags.
    var flags: [AbsoluteConfigKey: ConfigValue]
    /// An explicit config file, which must exist; without one, `/etc/mentoryd/mentoryd.json` if it exists.
    var configFile: String?
    /// The process environment, for `MENTORYD_*` and systemd's directories.
    var environment: [String: String]

    /// Flags over environment over config file; embedded defaults live in ``DaemonSettings``.
    func load() async throws -> DaemonSettings {
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "flags", values: self.flags),
            EnvironmentVariablesProvider(environmentVariables: self.environment).prefixKeys(with: "mentoryd"),
        ]
        if let configFile {
            providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(configFile)))
        } else {
            providers.append(
                try await FileProvider<JSONSnapshot>(filePath: "/etc/mentoryd/mentoryd.json", allowMissing: true)
            )
        }
        return try DaemonSettings(config: ConfigReader(providers: providers), environment: self.environment)
    }
}
