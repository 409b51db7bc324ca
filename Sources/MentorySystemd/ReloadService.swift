import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration on `SIGHUP`, telling the service manager with `RELOADING=1`
/// (stamped with `MONOTONIC_USEC`) before and `READY=1` after.
///
/// It keeps the configuration in effect and hands it to `reload`, which reads the new one,
/// applies what can change live, logs what needs a restart and returns the configuration now
/// in effect. A failed reload keeps the previous configuration and is logged; the daemon stays up.
///
/// Create the signal sequence before the service group starts, so a `SIGHUP` that arrives during
/// start-up is queued rather than terminating the process.
public struct ReloadService<Configuration: Sendable>: Service {
    private let notifier: SystemdNotifier
    private let signals: UnixSignalsSequence
    private let initial: Configuration
    private let logger: Logger
    private let reload: @Sendable (Configuration) async throws -> Configuration
    private let readyStatus: @Sendable () async -> String?

    /// - Parameters:
    ///   - notifier: Where `RELOADING=1` and `READY=1` go.
    ///   - signals: The signals that trigger a reload, typically `UnixSignalsSequence(trapping: .sighup)`.
    ///   - initial: The configuration in effect at start-up.
    ///   - logger: Reports reloads and their failures.
    ///   - readyStatus: A `STATUS=` line to send along with `READY=1`, if any.
    ///   - reload: Applies a reload to the configuration in effect and returns the one now in effect.
    public init(
        notifier: SystemdNotifier,
        signals: UnixSignalsSequence,
        initial: Configuration,
        logger: Logger,
        readyStatus: @escaping @Sendable () async -> String? = { nil },
        reload: @escaping @Sendable (Configuration) async throws -> Configuration
    ) {
        self.notifier = notifier
        self.signals = signals
        self.initial = initial
        self.logger = logger
        self.readyStatus = readyStatus
        self.reload = reload
    }

    /// Reloads on each signal until graceful shutdown.
    public func run() async throws {
        var current = self.initial
        for await signal in self.signals.cancelOnGracefulShutdown() {
            self.logger.info("reloading the configuration", metadata: ["signal": "\(signal)"])
            self.send([.reloadingNow])
            do {
                current = try await self.reload(current)
                self.logger.info("configuration reloaded")
            } catch {
                self.logger.error(
                    "reload failed; the previous configuration stays in effect",
                    metadata: ["error": "\(error)"]
                )
            }
            var ready: [NotifyState] = [.ready]
            if let line = await self.readyStatus() {
                ready.append(.status(line))
            }
            self.send(ready)
        }
    }

    private func send(_ states: [NotifyState]) {
        do {
            try self.notifier.notify(states)
        } catch {
            self.logger.warning("cannot notify the service manager", metadata: ["error": "\(error)"])
        }
    }
}

extension ReloadService: CustomStringConvertible {
    public var description: String { "ReloadService" }
}
