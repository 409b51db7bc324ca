import MentoryEngine
import MentoryStorageSQLite
import MentoryWire

/// One configuration key: its path, type, default, range, whether a reload applies it, and what it means.
///
/// ``ConfigurationKey/all`` is the one declaration of mentoryd's configuration. The config file is
/// validated against it (``ConfigurationValidator``), ``DaemonSettings`` takes each default and range
/// from it, a reload decides from it which changes need a restart, and docs/CONFIGURATION.md's table,
/// the man page and `mentoryd --help` are rendered from it (``ConfigurationReference``; a test checks the
/// committed text). Adding a key is one entry in ``all`` plus the line of ``DaemonSettings`` that reads it.
struct ConfigurationKey: Sendable {
    /// What a key holds.
    enum ValueType: Sendable, Equatable {
        /// A whole number in the range.
        case integer(ClosedRange<Int>)
        /// A string, one of the choices when there are any.
        case string(choices: [String])
        /// A permission such as `"0660"`: an octal string up to `0777`.
        case fileMode
        /// `true` or `false`.
        case bool
        /// An array of strings.
        case stringArray
    }

    /// The value a key has when nothing sets it.
    enum Default: Sendable {
        case integer(Int)
        case string(String)
        case bool(Bool)
        case strings([String])
        /// A default that depends on the environment, described in words.
        case described(String)
    }

    /// When a changed value takes effect.
    enum Reload: String, Sendable {
        /// At once, on `systemctl reload` (`mentoryctl reload`, SIGHUP).
        case live
        /// After a restart; a reload logs that it changed.
        case restart
    }

    /// The dotted path, e.g. `limits.maxFrameLength`; the component `NAME` stands for any name.
    let path: String
    let type: ValueType
    let defaultValue: Default
    let reload: Reload
    /// What it means, one sentence or two, for docs/CONFIGURATION.md, the man page and `--help`.
    let summary: String

    /// The path's components.
    var components: [String] { self.path.split(separator: ".").map(String.init) }

    /// The environment variable that sets it, e.g. `MENTORYD_LIMITS_MAX_FRAME_LENGTH`: swift-configuration's
    /// mapping (a camelCase boundary becomes `_`, then upper case), with the `MENTORYD_` prefix.
    var environmentVariable: String {
        var name = "MENTORYD"
        for component in self.components {
            var word = ""
            var previous: Character?
            for character in component {
                if let previous, previous.isLowercase, character.isUppercase { word.append("_") }
                word.append(character.isLetter || character.isNumber ? Character(character.uppercased()) : "_")
                previous = character
            }
            name += "_" + word
        }
        return name
    }
}

extension ConfigurationKey {
    /// The name standing for any plugin's or handler's name in a path.
    static let anyName = "NAME"

    /// Every configuration key mentoryd reads, in the order docs/CONFIGURATION.md lists them.
    static let all: [ConfigurationKey] = [
        ConfigurationKey(
            path: "socket.path", type: .string(choices: []),
            defaultValue: .described(
                "`$RUNTIME_DIRECTORY/mentoryd.sock`, else `$XDG_RUNTIME_DIR/mentoryd/mentoryd.sock`,"
                    + " else `/run/mentoryd/mentoryd.sock` (root)"),
            reload: .restart, summary: "The socket to bind (not used when systemd passes one)."),
        ConfigurationKey(
            path: "socket.mode", type: .fileMode, defaultValue: .string("0660"), reload: .restart,
            summary: "The socket's permission bits, in octal."),
        ConfigurationKey(
            path: "state.directory", type: .string(choices: []),
            defaultValue: .described(
                "`$STATE_DIRECTORY`, else `/var/lib/mentoryd` (root), else `$XDG_STATE_HOME/mentoryd`"),
            reload: .restart, summary: "Where the database lives."),
        ConfigurationKey(
            path: "storage.backend", type: .string(choices: StorageBackend.allCases.map(\.rawValue)),
            defaultValue: .string(StorageBackend.sqlite.rawValue), reload: .restart,
            summary: "`sqlite` (durable) or `memory` (nothing survives a restart)."),
        ConfigurationKey(
            path: "storage.checkpointPages", type: .integer(1...1_000_000),
            defaultValue: .integer(SQLiteSessionStore.Configuration(path: "").checkpointPages), reload: .restart,
            summary:
                "Log pages committed since the last checkpoint at which the SQLite store's writer copies its"
                + " write-ahead log into the database file, between two commits (see Storage)."),
        ConfigurationKey(
            path: "storage.maxLogPages", type: .integer(1...10_000_000),
            defaultValue: .integer(SQLiteSessionStore.Configuration(path: "").maxLogPages), reload: .restart,
            summary:
                "The log's length in pages at which the writer runs a `RESTART` checkpoint between two commits, for"
                + " a log a reader kept from starting over; its file stays under twice this plus one batch. At"
                + " least `storage.checkpointPages`."),
        ConfigurationKey(
            path: "log.level",
            type: .string(choices: ["trace", "debug", "info", "notice", "warning", "error", "critical"]),
            defaultValue: .string("info"), reload: .live, summary: "The least severe level logged."),
        ConfigurationKey(
            path: "limits.maxFrameLength",
            type: .integer(ReplyBudget.minimumMaxFrameLength...Int(UInt32.max)),
            defaultValue: .integer(WireProtocol.defaultMaxFrameLength), reload: .restart,
            summary:
                "The largest frame payload in bytes, checked from the length prefix before allocation; the least"
                + " value still fits the largest reply."),
        ConfigurationKey(
            path: "limits.subscriberQueueBytes", type: .integer(1024...(1 << 30)), defaultValue: .integer(1 << 20),
            reload: .restart,
            summary:
                "Per connection, events are queued only while the replies and events not yet taken by the peer"
                + " stay under it; past it, a reset follows."),
        ConfigurationKey(
            path: "limits.maxRequestsInFlight", type: .integer(1...65_536), defaultValue: .integer(128),
            reload: .restart, summary: "Per connection; past it the daemon stops reading (back-pressure)."),
        ConfigurationKey(
            path: "limits.maxConnections", type: .integer(1...1_000_000), defaultValue: .integer(1024),
            reload: .live, summary: "Connections at once."),
        ConfigurationKey(
            path: "limits.maxConnectionsPerUID", type: .integer(1...1_000_000), defaultValue: .integer(256),
            reload: .live, summary: "Connections one uid may hold."),
        ConfigurationKey(
            path: "limits.handshakeTimeoutSeconds", type: .integer(1...3600), defaultValue: .integer(10),
            reload: .restart, summary: "Time to send `Hello` before the connection is closed."),
        ConfigurationKey(
            path: "limits.maxOutboundBytes", type: .integer(1024...(1 << 30)), defaultValue: .integer(4 << 20),
            reload: .restart,
            summary:
                "Per connection, replies and events not yet taken by the peer; past it the daemon stops reading"
                + " that connection until half has drained."),
        ConfigurationKey(
            path: "limits.shutdownDrainSeconds", type: .integer(1...3600), defaultValue: .integer(5),
            reload: .restart,
            summary: "On shutdown, time a connection has to take its last frames before it is closed regardless."),
        ConfigurationKey(
            path: "limits.uidQueuedBytes", type: .integer(1024...(1 << 40)), defaultValue: .integer(16 << 20),
            reload: .restart,
            summary:
                "Per uid, all its connections together: replies and events not yet taken, plus what is reserved for"
                + " replies and snapshots being computed; past it none of the uid's connections is read and its"
                + " events wait for a reset, until half has drained (raised to at least six frames)."),
        ConfigurationKey(
            path: "limits.uidRequestsInFlight", type: .integer(1...1_000_000), defaultValue: .integer(256),
            reload: .restart,
            summary: "Requests in flight per uid, all its connections together; past it none of them is read."),
        ConfigurationKey(
            path: "limits.totalQueuedBytes", type: .integer(1024...(1 << 40)), defaultValue: .integer(64 << 20),
            reload: .restart,
            summary: "`limits.uidQueuedBytes` for every uid together (raised to at least six frames)."),
        ConfigurationKey(
            path: "limits.uidSubscriptions", type: .integer(1...1_000_000), defaultValue: .integer(1024),
            reload: .restart,
            summary:
                "Topic subscriptions per uid, all its connections together; past it `subscribe` fails"
                + " `UNAVAILABLE`."),
        ConfigurationKey(
            path: "limits.requestTimeoutMilliseconds", type: .integer(1...86_400_000), defaultValue: .integer(30_000),
            reload: .restart,
            summary:
                "A request's deadline when it names no shorter `timeout_ms`; handlers see it as"
                + " `RequestContext.deadline`."),
        ConfigurationKey(
            path: "limits.pluginCallTimeoutMilliseconds", type: .integer(1...86_400_000),
            defaultValue: .integer(5_000), reload: .restart,
            summary:
                "Longest wait for a plugin's answer; a request's shorter `timeout_ms` wins; then `DEADLINE_EXCEEDED`."),
        ConfigurationKey(
            path: "events.ringCapacity", type: .integer(1...1_000_000), defaultValue: .integer(4096),
            reload: .restart, summary: "Recent events kept per topic for resuming subscribers."),
        ConfigurationKey(
            path: "events.ringBytes", type: .integer(1024...(1 << 40)), defaultValue: .integer(4 << 20),
            reload: .restart,
            summary:
                "Bytes of recent events kept per topic (each event's frame, its body and headers, plus 64); the oldest go"
                + " first, the newest always stays. A subscriber resuming from further back gets a reset."),
        ConfigurationKey(
            path: "access.rules", type: .stringArray,
            defaultValue: .strings(AccessPolicy.default.rules.map(\.description)), reload: .live,
            summary:
                "The access policy: rules tried in order, the first that matches decides. Privileged methods and"
                + " topics stay closed whatever it leaves out; only a rule naming a uid or group grants one (see"
                + " Access rules)."),
        ConfigurationKey(
            path: "debug.faultInjection", type: .bool, defaultValue: .bool(false), reload: .restart,
            summary: "Registers the root-only `debug` namespace (tests only; never in production)."),
        ConfigurationKey(
            path: "handlers.NAME.enabled", type: .bool, defaultValue: .bool(true), reload: .restart,
            summary:
                "`false` leaves namespace NAME out: not routed, not described, its topics absent. NAME is a"
                + " namespace a handler of this mentoryd serves."),
        ConfigurationKey(
            path: "handlers.NAME.requires", type: .stringArray, defaultValue: .strings([]), reload: .restart,
            summary:
                "Namespaces that must open before this one (and close after it); a cycle or a missing one stops"
                + " start-up with exit status 78."),
        ConfigurationKey(
            path: "plugins.NAME.namespace", type: .string(choices: []), defaultValue: .described("NAME"),
            reload: .live,
            summary:
                "A `plugins.NAME` section (even `{}`) declares plugin NAME; this is the one namespace it may"
                + " register. A reload adds, changes or removes plugins: a plugin waiting to be declared"
                + " registers then."),
        ConfigurationKey(
            path: "plugins.NAME.requires", type: .stringArray, defaultValue: .strings([]), reload: .live,
            summary: "Namespaces its calls need; while a required plugin is down, calls fail `UNAVAILABLE` saying so."),
    ]

    /// The declared key at `path` (with `NAME` for a plugin's or handler's name).
    static func named(_ path: String) -> ConfigurationKey {
        guard let key = self.all.first(where: { $0.path == path }) else {
            preconditionFailure("configuration key \(path) is not declared in ConfigurationKey.all")
        }
        return key
    }

    /// The keys a reload applies at once.
    static var live: [ConfigurationKey] { self.all.filter { $0.reload == .live } }
}
