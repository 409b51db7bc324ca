import ArgumentParser
import Foundation
import MentoryClient
import MentoryWire

/// Options every `mentoryctl` command takes: where the daemon is and how to print.
struct ClientOptions: ParsableArguments {
    @Option(help: "The daemon's socket (default: $MENTORY_SOCKET, else the first socket found).")
    var socket: String?

    @Flag(help: "Print machine-readable JSON instead of text.")
    var json = false

    @Option(help: "Seconds to wait for each answer.")
    var timeout: Double = 30

    /// The socket to use: `--socket`, then `$MENTORY_SOCKET`, then the first default path that exists.
    func resolvedSocketPath() -> String {
        if let socket { return socket }
        let environment = ProcessInfo.processInfo.environment
        if let fromEnvironment = environment["MENTORY_SOCKET"], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        let candidates = DefaultPaths.clientSocketCandidates(environment: environment)
        return candidates.first { FileManager.default.fileExists(atPath: $0) } ?? candidates[0]
    }

    /// Connects and performs the handshake.
    func connect() async throws -> MentoryClient {
        try await MentoryClient.connect(
            socketPath: self.resolvedSocketPath(),
            clientName: "mentoryctl",
            defaultTimeout: .milliseconds(Int64(self.timeout * 1000))
        )
    }
}
