import CSystemd
import Logging
import ServiceLifecycle

/// The watchdog settings could not be read.
public enum WatchdogError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `sd_watchdog_enabled` rejected `WATCHDOG_USEC` or `WATCHDOG_PID`.
    case invalidEnvironment(errno: Int32)

    public var description: String {
        switch self {
        case .invalidEnvironment(let code):
            "cannot read the watchdog settings (WATCHDOG_USEC, WATCHDOG_PID) passed by the service manager: "
                + "errno \(code); check WatchdogSec= in the unit"
        }
    }
}

/// The service manager's watchdog (`sd_watchdog_enabled(3)`).
public enum SystemdWatchdog {
    /// The watchdog timeout (`WatchdogSec=`) when the service manager expects pings from this
    /// process, else `nil`.
    public static func timeout() throws(WatchdogError) -> Duration? {
        var microseconds: UInt64 = 0
        let result = sd_watchdog_enabled(0, &microseconds)
        guard result >= 0 else { throw .invalidEnvironment(errno: -result) }
        guard result > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(clamping: microseconds))
    }
}

/// Sends `WATCHDOG=1` at half the watchdog timeout, each time only after a liveness probe
/// came back.
///
/// The probe should make a round trip through what must not hang: mentoryd awaits its engine
/// actor, whose executor is the event loop, so a ping proves both run jobs. When the probe
/// hangs, the pings stop and the service manager kills and restarts the service.
///
/// Without a timeout (no `WatchdogSec=`) the service only waits for graceful shutdown.
public struct WatchdogService: Service {
    private let notifier: SystemdNotifier
    private let timeout: Duration?
    private let logger: Logger
    private let probe: @Sendable () async -> Void

    /// - Parameters:
    ///   - notifier: Where pings go.
    ///   - timeout: The watchdog timeout, from ``SystemdWatchdog/timeout()``; `nil` disables pings.
    ///   - logger: Reports a probe that does not come back in time.
    ///   - probe: Returns once the watched parts of the daemon have proven they run.
    public init(
        notifier: SystemdNotifier,
        timeout: Duration?,
        logger: Logger,
        probe: @escaping @Sendable () async -> Void
    ) {
        self.notifier = notifier
        self.timeout = timeout
        self.logger = logger
        self.probe = probe
    }

    /// Half the timeout, as `sd_watchdog_enabled(3)` recommends.
    public var pingInterval: Duration? {
        self.timeout.map { $0 / 2 }
    }

    /// Probes and pings until graceful shutdown; a probe that never returns stops the pings for good.
    public func run() async throws {
        guard let interval = self.pingInterval, self.notifier.isEnabled else {
            try? await gracefulShutdown()
            return
        }
        self.logger.debug("watchdog enabled", metadata: ["ping_interval": "\(interval)"])
        while !Task.isShuttingDownGracefully {
            await self.probeReportingDelays(every: interval)
            do {
                try self.notifier.notify(.watchdog)
            } catch {
                self.logger.warning("cannot ping the watchdog: \(error)", metadata: ["error": "\(error)"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
        }
    }

    /// Awaits the probe however long it takes, warning once it is half an `interval` late and
    /// then every `interval`, so the log says why before the service manager acts.
    private func probeReportingDelays(every interval: Duration) async {
        enum Outcome: Sendable {
            case answered
            case late
            case cancelled
        }
        let probe = self.probe
        await withTaskGroup(of: Outcome.self) { group in
            group.addTask {
                await probe()
                return .answered
            }
            group.addTask {
                (try? await Task.sleep(for: interval / 2)) == nil ? .cancelled : .late
            }
            var waited = interval / 2
            while let outcome = await group.next() {
                switch outcome {
                case .answered:
                    group.cancelAll()
                    return
                case .cancelled:
                    // Only the probe decides; a cancelled timer just stops warning.
                    continue
                case .late:
                    self.logger.warning(
                        "the engine has not answered the liveness probe; withholding WATCHDOG=1",
                        metadata: ["waited": "\(waited)"]
                    )
                    waited += interval
                    group.addTask {
                        (try? await Task.sleep(for: interval)) == nil ? .cancelled : .late
                    }
                }
            }
        }
    }
}

extension WatchdogService: CustomStringConvertible {
    public var description: String {
        "WatchdogService(pingInterval: \(self.pingInterval.map { "\($0)" } ?? "disabled"))"
    }
}
