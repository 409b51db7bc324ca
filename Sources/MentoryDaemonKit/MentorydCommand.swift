import ArgumentParser
import Configuration
import CoreMetrics
import Foundation
import Logging
import MentoryCommandLine
import MentoryHandlerKit
import MentoryMetrics
import MentorySystemd
import SystemPackage

/// The `mentoryd` command line.
struct MentorydCommand: AsyncParsableCommand {
    static let version = MentoryVersion.current

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
            A configuration it cannot use stops start-up with exit status 78; under socket activation \
            it stays up instead and tells every client why (STARTUP_FAILED). SIGHUP (systemctl reload) \
            reloads the config file: \(ConfigurationReference.liveKeys) and the handlers' own keys \
            change live; other changes are logged and need a restart; a configuration it cannot use \
            fails the reload and the previous one stays.

            The diary database is checked (PRAGMA quick_check) before READY=1 when the last run \
            did not stop cleanly, and in the background after READY=1 when it did; damage found \
            in the background stops mentoryd with exit status 1, and the restart refuses the file.

            \(ConfigurationReference.helpText)
            """,
        version: version
    )

    @Option(name: .customLong("socket"), help: "The Unix socket path to bind.")
    var socketPath: String?

    @Option(name: .customLong("state-dir"), help: "The directory for persistent state.")
    var stateDirectory: String?

    @Option(
        name: .customLong("config"),
        help: """
            A JSON config file (default: $MENTORYD_CONFIG, else, if it exists, $CONFIGURATION_DIRECTORY/mentoryd.json \
            under systemd, /etc/mentoryd/mentoryd.json for the system instance (root or the mentory user), \
            $XDG_CONFIG_HOME/mentoryd/mentoryd.json for a user instance).
            """
    )
    var configFile: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    @Option(name: .customLong("max-frame-length"), help: "The largest frame payload accepted, in bytes.")
    var maxFrameLength: Int?

    /// For scripts/generate-manuals.sh: print docs/CONFIGURATION.md's table of configuration keys and exit.
    @Flag(name: .customLong("print-config-reference"), help: ArgumentHelp(visibility: .private))
    var printConfigReference = false

    func run() async throws {
        try await self.run(adding: [])
    }

    /// The options above in their plainest form, which ``plain(_:)`` reads.
    static let plainCommandLine = PlainCommandLine(
        options: ["--socket", "--state-dir", "--config", "--log-level", "--max-frame-length"].map { .valued($0) }
    )

    /// The options of `arguments` (the command line without the program name) when each of them is one
    /// of the options above in its plainest form, else `nil`.
    ///
    /// swift-argument-parser's parse cost start-up about 1.5 ms before `READY=1`, and even making the
    /// command without parsing (its property wrappers build sets of names) about 0.4 ms. A command line of
    /// these options only, as ``PlainCommandLine`` reads them, with a whole number for
    /// `--max-frame-length`, is read here into the options the parsed command would hold. Anything else
    /// (help, `--version`, a repeated or unknown option, a bad value) goes to the parser, which accepts it
    /// or says what is wrong.
    static func plain(_ arguments: [String]) -> MentorydOptions? {
        guard let reading = self.plainCommandLine.read(arguments), reading.operands.isEmpty else { return nil }
        var options = MentorydOptions(
            socketPath: reading["--socket"],
            stateDirectory: reading["--state-dir"],
            configFile: reading["--config"],
            logLevel: reading["--log-level"]
        )
        if let length = reading["--max-frame-length"] {
            guard let length = Int(length) else { return nil }
            options.maxFrameLength = length
        }
        return options
    }

    /// The options as parsed.
    var options: MentorydOptions {
        MentorydOptions(
            socketPath: self.socketPath,
            stateDirectory: self.stateDirectory,
            configFile: self.configFile,
            logLevel: self.logLevel,
            maxFrameLength: self.maxFrameLength
        )
    }

    /// Runs the daemon with the built-in handlers and `extraHandlers`.
    func run(adding extraHandlers: [any MentoryHandler]) async throws {
        if self.printConfigReference {
            FileHandle.standardOutput.write(Data(ConfigurationReference.markdownTable.utf8))
            return
        }
        try await Self.run(self.options, adding: extraHandlers)
    }

    /// Runs the daemon with `options`, the built-in handlers and `extraHandlers`.
    static func run(_ options: MentorydOptions, adding extraHandlers: [any MentoryHandler]) async throws {
        let started = ContinuousClock.now
        let environment = ProcessInfo.processInfo.environment
        let logLevel = DynamicLogLevel(.info)
        let destination = SystemdLogging.destination(environment: environment)
        LoggingSystem.bootstrap(
            SystemdLogging.handlerFactory(syslogIdentifier: "mentoryd", level: logLevel, destination: destination),
            metadataProvider: nil
        )
        let logger = Logger(label: "mentoryd")
        // Before anything records (the store counts its commits): the one backend, read by session.metrics.
        let metrics = MentoryMetricsFactory()
        MetricsSystem.bootstrap(metrics)

        // What systemd passed comes first: with a socket in hand, a start-up failure is served on it.
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

        let source = SettingsSource(
            flags: options.flagValues,
            configFile: options.configFile ?? environment["MENTORYD_CONFIG"],
            environment: environment,
            addedNamespaces: extraHandlers.map { Daemon.namespace(of: $0) }
        )
        let settings: DaemonSettings
        do {
            settings = try await source.load()
        } catch {
            try await Self.failStartup(
                cause: "\(error); fix it, then restart mentoryd (systemctl restart mentoryd)",
                systemd: systemd,
                logger: logger,
                exitStatus: Self.configurationExitStatus
            )
        }
        logLevel.level = settings.logLevel
        logger.debug("logging", metadata: ["destination": "\(destination.rawValue)"])
        logger.debug(
            "start-up step",
            metadata: ["step": "logging, systemd environment, configuration", "ms": "\(Milliseconds(since: started))"]
        )

        let daemon = Daemon(
            settings: settings,
            version: Self.version,
            logger: logger,
            logLevel: logLevel,
            systemd: systemd,
            metrics: metrics,
            reloadSettings: { try await source.load() },
            extraHandlers: extraHandlers,
            started: started
        )
        do {
            try await daemon.run()
        } catch let failure as StartupFailure {
            try await Self.failStartup(
                cause: "\(failure.cause); after fixing it, restart mentoryd (systemctl restart mentoryd)",
                systemd: systemd,
                logger: logger,
                exitStatus: failure.exitStatus
            )
        } catch {
            logger.critical("mentoryd stopped: \(error)")
            try? systemd.notifier.notify(.status("Stopped: \(error)"))
            throw ExitCode.failure
        }
    }

    /// Start-up failed. Started by hand (no socket from systemd): log why, say `STATUS=` and exit
    /// with `exitStatus`. Socket-activated: stay up on the socket and tell every client why
    /// (``StartupFailureServer``), so that systemd does not start mentoryd again and again until
    /// its start limit takes the socket away.
    private static func failStartup(
        cause: String,
        systemd: Daemon.Systemd,
        logger: Logger,
        exitStatus: Int32
    ) async throws -> Never {
        guard let socket = systemd.activatedSocket else {
            logger.critical("mentoryd cannot start: \(cause)")
            try? systemd.notifier.notify(.status("Failed to start: \(cause)"))
            throw ExitCode(exitStatus)
        }
        let server = StartupFailureServer(
            cause: cause,
            socket: socket,
            notifier: systemd.notifier,
            watchdogTimeout: systemd.watchdogTimeout,
            logger: logger
        )
        do {
            try await server.run()
        } catch {
            logger.critical("mentoryd stopped: \(error)")
            throw ExitCode.failure
        }
        throw ExitCode.success
    }

}

/// The command line's options: what each option was given, `nil` when absent.
struct MentorydOptions: Sendable, Equatable {
    var socketPath: String?
    var stateDirectory: String?
    var configFile: String?
    var logLevel: String?
    var maxFrameLength: Int?

    /// The settings given as flags, as the highest-priority config provider sees them.
    var flagValues: [AbsoluteConfigKey: ConfigValue] {
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
    /// An explicit config file, which must exist; without one, ``defaultConfigFile`` if it exists.
    var configFile: String?
    /// The process environment, for `MENTORYD_*` and systemd's directories.
    var environment: [String: String]

    /// The config file read when none is named: the system instance's in `/etc`, a user instance's
    /// in its own config directory (``DaemonInstance/defaultConfigFile(environment:)``).
    static var defaultConfigFile: String {
        DaemonInstance.current().defaultConfigFile(environment: ProcessInfo.processInfo.environment)
    }

    /// The namespaces of the handlers an embedding package adds, whose `handlers.NAME` sections may hold
    /// keys of their own.
    var addedNamespaces: [String] = []

    /// Flags over environment over config file; embedded defaults live in ``ConfigurationKey/all``.
    ///
    /// The config file is parsed as strict JSON and checked against ``ConfigurationKey/all`` first, and
    /// the `MENTORYD_*` variables of the declared keys too. Throws ``ConfigurationError``, which names
    /// the config file and the key (with the nearest declared one for an unknown key) or, for a JSON
    /// syntax error, where in the file it is.
    func load() async throws(ConfigurationError) -> DaemonSettings {
        let file = self.configFile ?? Self.defaultConfigFile
        let validator = ConfigurationValidator(addedNamespaces: self.addedNamespaces)
        var pluginNames: [String] = []
        do throws(ConfigurationProblem) {
            try validator.validate(environment: self.environment)
            // A missing file is FileProvider's to report (or to allow, for the default one). One byte past the
            // limit is enough to refuse a file as too large.
            if let handle = FileHandle(forReadingAtPath: file) {
                defer { try? handle.close() }
                let data = (try? handle.read(upToCount: ConfigurationValidator.maxFileBytes + 1)) ?? Data()
                pluginNames = ConfigurationValidator.pluginNames(in: try validator.validate(file: Array(data)))
            }
        } catch {
            throw ConfigurationError(file: file, code: error.code, reason: error.description)
        }
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "flags", values: self.flags),
            EnvironmentVariablesProvider(environmentVariables: self.environment).prefixKeys(with: "mentoryd"),
        ]
        do {
            providers.append(
                try await FileProvider<JSONSnapshot>(filePath: FilePath(file), allowMissing: self.configFile == nil)
            )
        } catch {
            throw ConfigurationError(file: file, reason: ConfigurationError.describe(error, in: file))
        }
        do {
            return try DaemonSettings(
                config: ConfigReader(providers: providers),
                environment: self.environment,
                pluginNames: pluginNames,
                handlerNamespaces: ConfigurationValidator.builtInHandlerNamespaces + self.addedNamespaces
            )
        } catch {
            throw ConfigurationError(file: file, reason: self.describe(error))
        }
    }

    /// What is wrong with a setting, naming its `MENTORYD_*` variable when that variable set it (no flag
    /// did), so that the message points at the variable and not at a config file that may not exist.
    private func describe(_ error: SettingsError) -> String {
        guard case .invalid(let key, let reason) = error,
            self.flags[AbsoluteConfigKey(stringLiteral: key)] == nil,
            let variable = ConfigurationKey.all.first(where: { $0.path == key })?.environmentVariable,
            let raw = self.environment[variable]
        else { return error.description }
        var text = "$\(variable) (\(key)): \(reason)"
        if ConfigurationKey.all.first(where: { $0.path == key })?.type == .stringArray,
            raw.trimmingCharacters(in: .whitespaces).hasPrefix("[")
        {
            text +=
                "; a list in an environment variable is its items separated by commas, not JSON"
                + " (\(variable)='first item,second item'; see docs/CONFIGURATION.md)"
        }
        return text
    }
}

/// The configuration cannot be used: which file was read and what is wrong.
struct ConfigurationError: Error, CustomStringConvertible {
    /// The config file in use (which may be missing when it is the default one).
    var file: String
    /// A stable identifier of the kind of problem (``ConfigurationProblem/code``).
    var code = "CONFIG_INVALID"
    /// What is wrong, with the place in the file when the parser said.
    var reason: String

    var description: String {
        // A problem with a MENTORYD_* variable names the variable, not the file.
        self.reason.hasPrefix("$")
            ? "the configuration cannot be used: \(self.reason)"
            : "the configuration in \(self.file) cannot be used: \(self.reason)"
    }

    /// The parser's own words (e.g. "Invalid value around character 51.") when it gave any, with
    /// the line and column that character is at in `file`.
    static func describe(_ error: any Error, in file: String) -> String {
        var parts: [String] = []
        var current: (any Error)? = error
        var depth = 0
        while let error = current, depth < 4 {
            let nsError = error as NSError
            if let detail = nsError.userInfo[NSDebugDescriptionErrorKey] as? String, !detail.isEmpty {
                parts.append(detail + Self.location(describedIn: detail, file: file))
            } else if parts.isEmpty {
                parts.append("\(error)")
            }
            current = nsError.userInfo[NSUnderlyingErrorKey] as? any Error
            depth += 1
        }
        return parts.joined(separator: ": ")
    }

    /// " (line L, column C)" for a message that says "around character N" (a byte offset), else "".
    static func location(describedIn message: String, file: String) -> String {
        guard let range = message.range(of: "character "),
            let offset = Int(message[range.upperBound...].prefix { $0.isNumber }),
            let bytes = FileManager.default.contents(atPath: file), offset <= bytes.count
        else { return "" }
        let before = bytes.prefix(offset)
        let line = before.count { $0 == UInt8(ascii: "\n") } + 1
        let column = offset - (before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0) + 1
        return " (line \(line), column \(column))"
    }
}
