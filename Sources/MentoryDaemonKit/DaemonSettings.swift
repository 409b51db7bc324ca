import Configuration
import Logging
import MentoryEngine
import MentoryStorageSQLite
import MentoryWire

/// Everything mentoryd reads at start-up, after merging flags, environment, config file and defaults.
struct DaemonSettings: Sendable {
    var socketPath: String
    var socketMode: UInt16
    var stateDirectory: String
    var logLevel: Logger.Level
    var maxFrameLength: Int
    var subscriberQueueBytes: Int
    var maxRequestsInFlight: Int
    var maxConnections: Int
    var maxConnectionsPerUID: Int
    var accessPolicy: AccessPolicy
    var handshakeTimeoutSeconds: Int
    /// Bytes of replies and events one connection may have waiting for its socket before the daemon stops
    /// reading it (`limits.maxOutboundBytes`).
    var maxOutboundBytes: Int
    /// Seconds a connection has on shutdown to take its last frames before it is closed regardless
    /// (`limits.shutdownDrainSeconds`).
    var shutdownDrainSeconds: Int
    /// Bytes queued or reserved toward one uid's connections together before none of them is read
    /// (`limits.uidQueuedBytes`).
    var uidQueuedBytes: Int
    /// Requests one uid's connections may have in flight together (`limits.uidRequestsInFlight`).
    var uidRequestsInFlight: Int
    /// Bytes queued or reserved toward every connection together (`limits.totalQueuedBytes`).
    var totalQueuedBytes: Int
    /// Topic subscriptions one uid's connections may hold together (`limits.uidSubscriptions`).
    var uidSubscriptions: Int
    var eventRingCapacity: Int
    /// Whether the `debug` fault-injection handler is registered (`debug.faultInjection`; never in production).
    var faultInjection: Bool
    /// Where diary entries and the mentor state live (`storage.backend`: `sqlite`, the default, or `memory`).
    var storageBackend: StorageBackend
    /// Log pages committed since the last checkpoint at which the SQLite store copies its write-ahead log
    /// into the database file, beside the writer (`storage.checkpointPages`).
    var checkpointPages: Int
    /// The write-ahead log's length in pages at which the SQLite store's writer starts it over between two
    /// commits; the log's file stays under twice this plus one batch (`storage.maxLogPages`).
    var maxLogPages: Int
    /// How long a request may take when it names no shorter deadline (`limits.requestTimeoutMilliseconds`).
    var requestTimeoutMilliseconds: Int
    /// How long a plugin may take to answer a forwarded call (`limits.pluginCallTimeoutMilliseconds`).
    var pluginCallTimeoutMilliseconds: Int
    /// The plugins that may register, from `plugins.declared` and each one's `plugins.<name>` section.
    var plugins: [PluginDeclaration]
    /// The whole configuration, for the handlers' own sections (`handlers.<namespace>`).
    var config: ConfigReader

    /// Handler `namespace`'s own section: `enabled`, `requires`, and the handler's keys.
    func handlerConfig(_ namespace: String) -> ConfigReader {
        self.config.scoped(to: ConfigKey(["handlers", namespace]))
    }

    /// Reads the settings from `config`, with embedded defaults for anything it lacks.
    init(config: ConfigReader, environment: [String: String]) throws(SettingsError) {
        self.socketPath = config.string(
            forKey: "socket.path",
            default: DefaultPaths.daemonSocketPath(environment: environment)
        )
        let mode = config.string(forKey: "socket.mode", default: "0660")
        guard let parsedMode = UInt16(mode, radix: 8), parsedMode <= 0o777 else {
            throw .invalid(key: "socket.mode", reason: "'\(mode)' is not an octal permission such as 0660")
        }
        self.socketMode = parsedMode
        self.stateDirectory = config.string(
            forKey: "state.directory",
            default: Self.defaultStateDirectory(environment: environment)
        )
        let level = config.string(forKey: "log.level", default: "info")
        guard let parsedLevel = Logger.Level(rawValue: level.lowercased()) else {
            throw .invalid(
                key: "log.level",
                reason: "'\(level)' is not one of trace, debug, info, notice, warning, error, critical"
            )
        }
        self.logLevel = parsedLevel
        self.maxFrameLength = try Self.positive(config, "limits.maxFrameLength", WireProtocol.defaultMaxFrameLength)
        self.subscriberQueueBytes = try Self.positive(config, "limits.subscriberQueueBytes", 1 << 20)
        self.maxRequestsInFlight = try Self.positive(config, "limits.maxRequestsInFlight", 128)
        self.maxConnections = try Self.positive(config, "limits.maxConnections", 1024)
        self.maxConnectionsPerUID = try Self.positive(config, "limits.maxConnectionsPerUID", 256)
        let rules = config.stringArray(
            forKey: "access.rules",
            default: AccessPolicy.default.rules.map(\.description)
        )
        do {
            self.accessPolicy = try AccessPolicy(parsing: rules)
        } catch {
            throw .invalid(key: "access.rules", reason: error.message)
        }
        self.handshakeTimeoutSeconds = try Self.positive(config, "limits.handshakeTimeoutSeconds", 10)
        self.maxOutboundBytes = try Self.positive(config, "limits.maxOutboundBytes", 4 << 20)
        self.shutdownDrainSeconds = try Self.positive(config, "limits.shutdownDrainSeconds", 5)
        self.uidQueuedBytes = try Self.positive(config, "limits.uidQueuedBytes", 16 << 20)
        self.uidRequestsInFlight = try Self.positive(config, "limits.uidRequestsInFlight", 256)
        self.totalQueuedBytes = try Self.positive(config, "limits.totalQueuedBytes", 64 << 20)
        self.uidSubscriptions = try Self.positive(config, "limits.uidSubscriptions", 1024)
        self.eventRingCapacity = try Self.positive(config, "events.ringCapacity", 4096)
        self.faultInjection = config.bool(forKey: "debug.faultInjection", default: false)
        let backend = config.string(forKey: "storage.backend", default: StorageBackend.sqlite.rawValue)
        guard let parsedBackend = StorageBackend(rawValue: backend.lowercased()) else {
            throw .invalid(key: "storage.backend", reason: "'\(backend)' is not one of sqlite, memory")
        }
        self.storageBackend = parsedBackend
        let storeDefaults = SQLiteSessionStore.Configuration(path: "")
        self.checkpointPages = try Self.positive(config, "storage.checkpointPages", storeDefaults.checkpointPages)
        self.maxLogPages = try Self.positive(config, "storage.maxLogPages", storeDefaults.maxLogPages)
        guard self.maxLogPages >= self.checkpointPages else {
            throw .invalid(
                key: "storage.maxLogPages",
                reason: "it must be at least storage.checkpointPages (\(self.checkpointPages)), not \(self.maxLogPages)"
            )
        }
        self.requestTimeoutMilliseconds = try Self.positive(config, "limits.requestTimeoutMilliseconds", 30_000)
        self.pluginCallTimeoutMilliseconds = try Self.positive(config, "limits.pluginCallTimeoutMilliseconds", 5_000)
        self.plugins = try Self.plugins(config)
        self.config = config
        guard self.maxFrameLength <= Int(UInt32.max) else {
            throw .invalid(key: "limits.maxFrameLength", reason: "it must fit the 4-byte length prefix")
        }
    }

    /// Plugin `name`'s own section: `namespace` and `requires`.
    func pluginConfig(_ name: String) -> ConfigReader {
        self.config.scoped(to: ConfigKey(["plugins", name]))
    }

    /// Reads `plugins.declared` (the plugins' names) and, for each, `plugins.<name>.namespace`
    /// (default: the name) and `plugins.<name>.requires`.
    private static func plugins(_ config: ConfigReader) throws(SettingsError) -> [PluginDeclaration] {
        var declarations: [PluginDeclaration] = []
        var namespaces: Set<String> = []
        for name in config.stringArray(forKey: "plugins.declared", default: []) {
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw .invalid(
                    key: "plugins.declared", reason: "'\(name)' is not a plugin name (letters, digits, - and _)")
            }
            let section = config.scoped(to: ConfigKey(["plugins", name]))
            let namespace = section.string(forKey: "namespace", default: name)
            guard !namespace.isEmpty, namespaces.insert(namespace).inserted else {
                throw .invalid(
                    key: "plugins.\(name).namespace", reason: "namespace '\(namespace)' is empty or declared twice")
            }
            declarations.append(
                PluginDeclaration(
                    name: name, namespace: namespace, requires: section.stringArray(forKey: "requires", default: [])))
        }
        return declarations
    }

    private static func positive(_ config: ConfigReader, _ key: String, _ fallback: Int) throws(SettingsError) -> Int {
        let value = config.int(forKey: ConfigKey(key), default: fallback)
        guard value > 0 else {
            throw .invalid(key: key, reason: "it must be a positive number, not \(value)")
        }
        return value
    }

    /// `$STATE_DIRECTORY` under systemd, `/var/lib/mentoryd` for root, else the XDG state directory.
    static func defaultStateDirectory(environment: [String: String]) -> String {
        if let state = environment["STATE_DIRECTORY"], !state.isEmpty {
            return String(state.split(separator: ":").first ?? Substring(state))
        }
        if environment["USER"] == "root" || environment["HOME"] == "/root" {
            return "/var/lib/mentoryd"
        }
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty {
            return xdg + "/mentoryd"
        }
        return (environment["HOME"] ?? "/tmp") + "/.local/state/mentoryd"
    }
}

/// A setting that cannot be used.
enum SettingsError: Error, CustomStringConvertible {
    case invalid(key: String, reason: String)

    var description: String {
        switch self {
        case .invalid(let key, let reason):
            "invalid setting \(key): \(reason)"
        }
    }
}

extension DaemonSettings {
    /// The settings a reload cannot apply, each with its config key: a change is logged as needing a restart.
    static let restartOnly: [(key: String, changed: @Sendable (DaemonSettings, DaemonSettings) -> Bool)] = [
        ("socket.path", { $0.socketPath != $1.socketPath }),
        ("socket.mode", { $0.socketMode != $1.socketMode }),
        ("state.directory", { $0.stateDirectory != $1.stateDirectory }),
        ("limits.maxFrameLength", { $0.maxFrameLength != $1.maxFrameLength }),
        ("limits.subscriberQueueBytes", { $0.subscriberQueueBytes != $1.subscriberQueueBytes }),
        ("limits.maxRequestsInFlight", { $0.maxRequestsInFlight != $1.maxRequestsInFlight }),
        ("limits.handshakeTimeoutSeconds", { $0.handshakeTimeoutSeconds != $1.handshakeTimeoutSeconds }),
        ("limits.maxOutboundBytes", { $0.maxOutboundBytes != $1.maxOutboundBytes }),
        ("limits.shutdownDrainSeconds", { $0.shutdownDrainSeconds != $1.shutdownDrainSeconds }),
        ("limits.uidQueuedBytes", { $0.uidQueuedBytes != $1.uidQueuedBytes }),
        ("limits.uidRequestsInFlight", { $0.uidRequestsInFlight != $1.uidRequestsInFlight }),
        ("limits.totalQueuedBytes", { $0.totalQueuedBytes != $1.totalQueuedBytes }),
        ("limits.uidSubscriptions", { $0.uidSubscriptions != $1.uidSubscriptions }),
        ("events.ringCapacity", { $0.eventRingCapacity != $1.eventRingCapacity }),
        ("limits.requestTimeoutMilliseconds", { $0.requestTimeoutMilliseconds != $1.requestTimeoutMilliseconds }),
        ("debug.faultInjection", { $0.faultInjection != $1.faultInjection }),
        (
            "limits.pluginCallTimeoutMilliseconds",
            { $0.pluginCallTimeoutMilliseconds != $1.pluginCallTimeoutMilliseconds }
        ),
        ("plugins", { $0.plugins != $1.plugins }),
        ("storage.backend", { $0.storageBackend != $1.storageBackend }),
        ("storage.checkpointPages", { $0.checkpointPages != $1.checkpointPages }),
        ("storage.maxLogPages", { $0.maxLogPages != $1.maxLogPages }),
    ]
}
