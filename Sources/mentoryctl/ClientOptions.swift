import ArgumentParser
import Foundation
import MentoryClient
import MentoryWire

/// Options every `mentoryctl` command takes: where the daemon is and how to print.
///
/// They are global: they may be written before the subcommand too (see ``GlobalOptions``).
struct ClientOptions: ParsableArguments {
    @Option(help: "The daemon's socket (default: $MENTORY_SOCKET, else the first trusted socket found).")
    var socket: String?

    @Flag(help: "Print machine-readable JSON instead of text.")
    var json = false

    @Option(help: "Seconds to wait for each answer.")
    var timeout: Double = ClientOptions.defaultTimeout

    /// `--timeout`'s default, in seconds.
    static let defaultTimeout: Double = 30
}

/// The values of ``ClientOptions``, and what commands do with them: connect, and say what failed.
///
/// ``ClientOptions`` is how the parser fills them; ``PlainClientSettings`` is how ``FastPath`` does.
protocol ClientSettings {
    var socket: String? { get }
    var json: Bool { get }
    var timeout: Double { get }
}

extension ClientOptions: ClientSettings {}

/// ``ClientSettings`` without the parser's property wrappers.
struct PlainClientSettings: ClientSettings {
    var socket: String?
    var json = false
    var timeout = ClientOptions.defaultTimeout
}

extension ClientSettings {
    /// The socket to use: `--socket`, then `$MENTORY_SOCKET`, then the first trusted default socket that exists.
    func resolvedSocketPath(trust: SocketTrust = .standard()) throws(MentoryClientError) -> String {
        try SocketLocator.locate(explicit: self.socket, environment: self.locatorEnvironment(), trust: trust)
    }

    /// The only variables ``SocketLocator`` reads, without building the whole environment.
    private func locatorEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        for key in [SocketLocator.socketEnvironmentKey, "XDG_RUNTIME_DIR"] {
            if let value = getenv(key) { environment[key] = String(cString: value) }
        }
        return environment
    }

    /// The per-answer wait, `--timeout` seconds.
    private var answerTimeout: Duration { .milliseconds(Int64(self.timeout * 1000)) }

    /// Connects without an event loop and performs the handshake; the socket must pass ``SocketTrust``.
    ///
    /// For one-shot commands: everything runs on the calling thread (see ``BlockingMentoryConnection``).
    /// When `pipelined`, the first call goes out right behind the `Hello`, so that a command costs one
    /// round trip; `ping` does not, so that the time it prints is the call's alone.
    func connectBlocking(pipelined: Bool = true) throws(MentoryClientError) -> BlockingMentoryConnection {
        let trust = SocketTrust.standard()
        let socketPath = try self.resolvedSocketPath(trust: trust)
        guard pipelined else {
            return try BlockingMentoryConnection.connect(
                socketPath: socketPath, clientName: "mentoryctl", defaultTimeout: self.answerTimeout, trust: trust)
        }
        return try BlockingMentoryConnection.connectPipelined(
            socketPath: socketPath, clientName: "mentoryctl", defaultTimeout: self.answerTimeout, trust: trust)
    }

    /// Connects and performs the handshake; the socket must pass ``SocketTrust``.
    func connect() async throws -> MentoryClient {
        try await MentoryClient.connect(
            socketPath: self.resolvedSocketPath(),
            clientName: "mentoryctl",
            defaultTimeout: self.answerTimeout
        )
    }
}

/// Moves the global options written before the subcommand to after it, where the parser takes them.
///
/// `mentoryctl --socket PATH --json diary list` becomes `mentoryctl diary list --socket PATH --json`.
/// Only the options of ``ClientOptions`` are moved, and only from before the first other word;
/// they are put before a `--` terminator, if any, so they stay options.
enum GlobalOptions {
    /// Options that take a value (as `--name value` or `--name=value`).
    static let valued = ["--socket", "--timeout"]
    /// Options that take none.
    static let flags = ["--json"]

    static func reorder(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let word = arguments[index]
            let name = word.split(separator: "=", maxSplits: 1).first.map(String.init) ?? word
            if self.flags.contains(word) {
                leading.append(word)
                index += 1
            } else if self.valued.contains(name), word.contains("=") {
                leading.append(word)
                index += 1
            } else if self.valued.contains(word), index + 1 < arguments.endIndex {
                leading += [word, arguments[index + 1]]
                index += 2
            } else {
                break
            }
        }
        guard !leading.isEmpty else { return arguments }
        var rest = Array(arguments[index...])
        let end = rest.firstIndex(of: "--") ?? rest.endIndex
        rest.insert(contentsOf: leading, at: end)
        return rest
    }
}
