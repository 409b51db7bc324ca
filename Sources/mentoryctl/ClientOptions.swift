import ArgumentParser
import Foundation
import MentoryClient
import MentoryWire

/// Options every `mentoryctl` command takes: where the daemon is and how to print.
///
/// They are global: the root command, ``Mentoryctl``, holds them, so they may be written before or after
/// the subcommand, and each subcommand reads them through its `@ParentCommand`.
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
        for key in [SocketLocator.socketEnvironmentKey, "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "HOME"] {
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
