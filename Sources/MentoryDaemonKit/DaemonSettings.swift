import Configuration
import Logging
import MentoryEngine
import MentoryHandlerKit
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
    /// Bytes of recent events kept per topic (`events.ringBytes`).
    var eventRingBytes: Int
    /// Whether the `debug` fault-injection handler is registered (`debug.faultInjection`; never in production).
    var faultInjection: Bool
    /// Where diary entries and the mentor state live (`storage.backend`: `sqlite`, the default, or `memory`).
    var storageBackend: StorageBackend
    /// Log pages committed since the last checkpoint at which the SQLite store copies its write-ahead log
    /// into the database file, on its writer between two commits (`storage.checkpointPages`).
    var checkpointPages: Int
    /// The write-ahead log's length in pages at which the SQLite store's writer starts it over between two
    /// commits; the log's file stays under twice this plus one batch (`storage.maxLogPages`).
    var maxLogPages: Int
    /// How long a request may take when it names no shorter deadline (`limits.requestTimeoutMilliseconds`).
    var requestTimeoutMilliseconds: Int
    /// How long a plugin may take to answer a forwarded call (`limits.pluginCallTimeoutMilliseconds`).
    var pluginCallTimeoutMilliseconds: Int
    /// The plugins that may register: one for each `plugins.NAME` section of the config file.
    var plugins: [PluginDeclaration]
    /// The whole configuration, for the handlers' own sections (`handlers.<namespace>`).
    var config: ConfigReader

    /// Handler `namespace`'s own section: `enabled`, `requires`, and the handler's keys.
    func handlerConfig(_ namespace: String) -> ConfigReader {
        self.config.scoped(to: ConfigKey(["handlers", namespace]))
    }

    /// Each setting a reload cannot apply, by its key's path, as it was read: comparing two settings' values
    /// tells which of them a reload would have to restart for (see ``ConfigurationKey/Reload``).
    var restartValues: [String: String] = [:]

    /// Reads the settings from `config`, with the defaults and ranges of ``ConfigurationKey/all`` for
    /// anything it lacks; `pluginNames` are the names of the config file's `plugins.NAME` sections, and
    /// `handlerNamespaces` the namespaces whose `handlers.NAME` sections a reload compares.
    init(
        config: ConfigReader,
        environment: [String: String],
        pluginNames: [String] = [],
        handlerNamespaces: [String] = ConfigurationValidator.builtInHandlerNamespaces
    ) throws(SettingsError) {
        var values: [String: String] = [:]
        self.socketPath = try Self.string(
            config, "socket.path", default: DefaultPaths.daemonSocketPath(environment: environment), &values)
        let mode = try Self.string(config, "socket.mode", &values)
        guard let parsedMode = UInt16(mode, radix: 8), parsedMode <= 0o777 else {
            throw .invalid(key: "socket.mode", reason: "'\(mode)' is not an octal permission such as 0660")
        }
        self.socketMode = parsedMode
        self.stateDirectory = try Self.string(
            config, "state.directory", default: Self.defaultStateDirectory(environment: environment), &values)
        let level = try Self.string(config, "log.level", &values)
        guard let parsedLevel = Logger.Level(rawValue: level.lowercased()) else {
            throw .invalid(
                key: "log.level",
                reason: "'\(level)' is not one of trace, debug, info, notice, warning, error, critical"
            )
        }
        self.logLevel = parsedLevel
        self.maxFrameLength = try Self.integer(config, "limits.maxFrameLength", &values)
        self.subscriberQueueBytes = try Self.integer(config, "limits.subscriberQueueBytes", &values)
        self.maxRequestsInFlight = try Self.integer(config, "limits.maxRequestsInFlight", &values)
        self.maxConnections = try Self.integer(config, "limits.maxConnections", &values)
        self.maxConnectionsPerUID = try Self.integer(config, "limits.maxConnectionsPerUID", &values)
        let rules = try Self.strings(config, "access.rules", &values)
        do {
            self.accessPolicy = try AccessPolicy(parsing: rules)
        } catch {
            throw .invalid(key: "access.rules", reason: error.message)
        }
        self.handshakeTimeoutSeconds = try Self.integer(config, "limits.handshakeTimeoutSeconds", &values)
        self.maxOutboundBytes = try Self.integer(config, "limits.maxOutboundBytes", &values)
        self.shutdownDrainSeconds = try Self.integer(config, "limits.shutdownDrainSeconds", &values)
        self.uidQueuedBytes = try Self.integer(config, "limits.uidQueuedBytes", &values)
        self.uidRequestsInFlight = try Self.integer(config, "limits.uidRequestsInFlight", &values)
        self.totalQueuedBytes = try Self.integer(config, "limits.totalQueuedBytes", &values)
        self.uidSubscriptions = try Self.integer(config, "limits.uidSubscriptions", &values)
        self.eventRingCapacity = try Self.integer(config, "events.ringCapacity", &values)
        self.eventRingBytes = try Self.integer(config, "events.ringBytes", &values)
        self.faultInjection = try Self.bool(config, "debug.faultInjection", &values)
        let backend = try Self.string(config, "storage.backend", &values)
        guard let parsedBackend = StorageBackend(rawValue: backend.lowercased()) else {
            throw .invalid(key: "storage.backend", reason: "'\(backend)' is not one of sqlite, memory")
        }
        self.storageBackend = parsedBackend
        self.checkpointPages = try Self.integer(config, "storage.checkpointPages", &values)
        self.maxLogPages = try Self.integer(config, "storage.maxLogPages", &values)
        guard self.maxLogPages >= self.checkpointPages else {
            throw .invalid(
                key: "storage.maxLogPages",
                reason: "it must be at least storage.checkpointPages (\(self.checkpointPages)), not \(self.maxLogPages)"
            )
        }
        self.requestTimeoutMilliseconds = try Self.integer(config, "limits.requestTimeoutMilliseconds", &values)
        self.pluginCallTimeoutMilliseconds = try Self.integer(config, "limits.pluginCallTimeoutMilliseconds", &values)
        // A reload applies the plugin sections (Daemon.apply): they are not restart values.
        self.plugins = try Self.plugins(config, names: pluginNames)
        for namespace in handlerNamespaces {
            let section = config.scoped(to: ConfigKey(["handlers", namespace]))
            values["handlers.\(namespace).enabled"] = "\(section.bool(forKey: "enabled", default: true))"
            values["handlers.\(namespace).requires"] = "\(section.stringArray(forKey: "requires", default: []))"
        }
        self.config = config
        self.restartValues = values.filter { path, _ in
            ConfigurationKey.all.first { $0.path == path }?.reload != .live
        }
    }

    /// Plugin `name`'s own section: `namespace` and `requires`.
    func pluginConfig(_ name: String) -> ConfigReader {
        self.config.scoped(to: ConfigKey(["plugins", name]))
    }

    /// Whether `name` may name a plugin: letters, digits, `-` and `_`.
    static func isPluginName(_ name: String) -> Bool {
        !name.isEmpty && name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
    }

    /// The plugins `names` (the config file's `plugins.NAME` sections), each with `plugins.NAME.namespace`
    /// (default: the name) and `plugins.NAME.requires`.
    private static func plugins(_ config: ConfigReader, names: [String]) throws(SettingsError) -> [PluginDeclaration] {
        var declarations: [PluginDeclaration] = []
        var namespaces: Set<String> = []
        for name in names {
            guard Self.isPluginName(name) else {
                throw .invalid(
                    key: "plugins.\(name)", reason: "'\(name)' is not a plugin name (letters, digits, - and _)")
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

    /// Integer key `path`, its declared default when unset, refused outside its declared range.
    private static func integer(
        _ config: ConfigReader, _ path: String, _ values: inout [String: String]
    ) throws(SettingsError) -> Int {
        let key = ConfigurationKey.named(path)
        guard case .integer(let range) = key.type, case .integer(let fallback) = key.defaultValue else {
            preconditionFailure("\(path) is not declared as an integer")
        }
        let value = config.int(forKey: ConfigKey(path), default: fallback)
        guard range.contains(value) else {
            throw .invalid(
                key: path, reason: "it must be from \(range.lowerBound) to \(range.upperBound), not \(value)")
        }
        values[path] = "\(value)"
        return value
    }

    /// String key `path`, `fallback` (else its declared default) when unset.
    private static func string(
        _ config: ConfigReader, _ path: String, default fallback: String? = nil, _ values: inout [String: String]
    ) throws(SettingsError) -> String {
        let key = ConfigurationKey.named(path)
        var declaredDefault = ""
        if case .string(let text) = key.defaultValue { declaredDefault = text }
        let value = config.string(forKey: ConfigKey(path), default: fallback ?? declaredDefault)
        guard !value.isEmpty else { throw .invalid(key: path, reason: "it must not be empty") }
        values[path] = value
        return value
    }

    /// Boolean key `path`, its declared default when unset.
    private static func bool(
        _ config: ConfigReader, _ path: String, _ values: inout [String: String]
    ) throws(SettingsError) -> Bool {
        guard case .bool(let fallback) = ConfigurationKey.named(path).defaultValue else {
            preconditionFailure("\(path) is not declared as a boolean")
        }
        let value = config.bool(forKey: ConfigKey(path), default: fallback)
        values[path] = "\(value)"
        return value
    }

    /// String-array key `path`, its declared default when unset.
    private static func strings(
        _ config: ConfigReader, _ path: String, _ values: inout [String: String]
    ) throws(SettingsError) -> [String] {
        guard case .strings(let fallback) = ConfigurationKey.named(path).defaultValue else {
            preconditionFailure("\(path) is not declared as an array of strings")
        }
        let value = config.stringArray(forKey: ConfigKey(path), default: fallback)
        values[path] = "\(value)"
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
    /// The settings a reload cannot apply that differ between `current` and `reloaded`, by key path.
    static func changedNeedingRestart(_ current: DaemonSettings, _ reloaded: DaemonSettings) -> [String] {
        Set(current.restartValues.keys).union(reloaded.restartValues.keys).sorted().filter {
            current.restartValues[$0] != reloaded.restartValues[$0]
        }
    }
}

extension DaemonSettings {
    /// What handlers may read of these settings (``GlobalSettings``), for the daemon running as `instance`.
    func handlerSettings(instance: DaemonInstance) -> GlobalSettings {
        GlobalSettings(
            instanceKind: instance.kind == .system ? .system : .user,
            daemonUID: instance.uid,
            stateDirectory: self.stateDirectory,
            maxFrameLength: self.maxFrameLength,
            maxReplyBytes: ReplyBudget.bodyBytes(maxFrameLength: self.maxFrameLength),
            requestTimeout: .milliseconds(self.requestTimeoutMilliseconds),
            logLevel: self.logLevel
        )
    }
}
