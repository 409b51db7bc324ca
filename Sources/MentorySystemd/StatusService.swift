import Logging
import ServiceLifecycle

/// Keeps the service manager's `STATUS=` line current and says `STOPPING=1` when graceful
/// shutdown begins.
///
/// Every `interval` it asks `status` for a line and sends it when it changed. Put it last in
/// the service group: the group shuts services down in reverse order, so `STOPPING=1` goes out
/// before anything else starts stopping.
public struct StatusService: Service {
    private let notifier: SystemdNotifier
    private let interval: Duration
    private let logger: Logger
    private let status: @Sendable () async -> String

    /// - Parameters:
    ///   - notifier: Where `STATUS=` and `STOPPING=1` go.
    ///   - interval: How often to refresh the line.
    ///   - logger: Reports notifications that cannot be sent.
    ///   - status: The current human-readable status, one line.
    public init(
        notifier: SystemdNotifier,
        interval: Duration = .seconds(5),
        logger: Logger,
        status: @escaping @Sendable () async -> String
    ) {
        self.notifier = notifier
        self.interval = interval
        self.logger = logger
        self.status = status
    }

    /// Refreshes `STATUS=` until graceful shutdown, then sends `STOPPING=1`.
    public func run() async throws {
        let interval = self.interval
        let status = self.status
        var lastSent: String?
        while !Task.isShuttingDownGracefully {
            guard
                let line = try? await cancelWhenGracefulShutdown({
                    try await Task.sleep(for: interval)
                    return await status()
                })
            else {
                break
            }
            if line != lastSent {
                self.send([.status(line)])
                lastSent = line
            }
        }
        self.send([.stopping, .status("Shutting down")])
    }

    private func send(_ states: [NotifyState]) {
        do {
            try self.notifier.notify(states)
        } catch {
            self.logger.warning("cannot notify the service manager: \(error)", metadata: ["error": "\(error)"])
        }
    }
}

extension StatusService: CustomStringConvertible {
    public var description: String { "StatusService(interval: \(self.interval))" }
}
