import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration on `SIGHUP` and on request (``ReloadRequests``), one reload at a
/// time, telling the service manager with `RELOADING=1` (stamped with `MONOTONIC_USEC`) before
/// and `READY=1` after.
///
/// It keeps the configuration in effect and hands it to `reload`, which reads the new one,
/// applies what can change live, logs what needs a restart and returns the configuration now
/// in effect. A failed reload keeps the previous configuration and is logged with its cause; a
/// caller that asked through ``ReloadRequests`` gets the error, so `ExecReload=` can fail the
/// reload job. The daemon stays up either way.
///
/// Create the signal sequence before the service group starts, so a `SIGHUP` that arrives during
/// start-up is queued rather than terminating the process.
public struct ReloadService<Configuration: Sendable>: Service {
    private let notifier: SystemdNotifier
    private let signals: UnixSignalsSequence
    private let requests: ReloadRequests
    private let initial: Configuration
    private let logger: Logger
    private let reload: @Sendable (Configuration) async throws -> Configuration
    private let readyStatus: @Sendable () async -> String?

    /// - Parameters:
    ///   - notifier: Where `RELOADING=1` and `READY=1` go.
    ///   - signals: The signals that trigger a reload, typically `UnixSignalsSequence(trapping: .sighup)`.
    ///   - requests: Reloads asked for by callers that wait for the outcome.
    ///   - initial: The configuration in effect at start-up.
    ///   - logger: Reports reloads and their failures.
    ///   - readyStatus: A `STATUS=` line to send along with `READY=1`, if any.
    ///   - reload: Applies a reload to the configuration in effect and returns the one now in effect.
    public init(
        notifier: SystemdNotifier,
        signals: UnixSignalsSequence,
        requests: ReloadRequests = ReloadRequests(),
        initial: Configuration,
        logger: Logger,
        readyStatus: @escaping @Sendable () async -> String? = { nil },
        reload: @escaping @Sendable (Configuration) async throws -> Configuration
    ) {
        self.notifier = notifier
        self.signals = signals
        self.requests = requests
        self.initial = initial
        self.logger = logger
        self.readyStatus = readyStatus
        self.reload = reload
    }

    /// Reloads on each signal or request until graceful shutdown.
    public func run() async throws {
        let requests = self.requests
        let signals = self.signals
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Signals join the requests' queue, so that both are served one at a time in order.
            group.addTask {
                for await signal in signals.cancelOnGracefulShutdown() {
                    requests.enqueueSignal("\(signal)")
                }
            }
            group.addTask {
                try await self.serve(requests)
            }
            try await group.waitForAll()
        }
    }

    private func serve(_ requests: ReloadRequests) async throws {
        var current = self.initial
        for await request in requests.stream.cancelOnGracefulShutdown() {
            self.logger.info("reloading the configuration", metadata: ["trigger": "\(request.trigger)"])
            self.send([.reloadingNow])
            do {
                current = try await self.reload(current)
                self.logger.info("configuration reloaded")
                request.reply?.resume()
            } catch {
                self.logger.error("reload failed, the previous configuration stays in effect: \(error)")
                request.reply?.resume(throwing: error)
            }
            var ready: [NotifyState] = [.ready]
            if let line = await self.readyStatus() {
                ready.append(.status(line))
            }
            self.send(ready)
        }
        requests.finish()
        for await request in requests.stream {
            request.reply?.resume(throwing: ReloadRequestError.stopped)
        }
    }

    private func send(_ states: [NotifyState]) {
        do {
            try self.notifier.notify(states)
        } catch {
            self.logger.warning("cannot notify the service manager: \(error)", metadata: ["error": "\(error)"])
        }
    }
}

extension ReloadService: CustomStringConvertible {
    public var description: String { "ReloadService" }
}

/// Reloads asked for by callers that wait for the outcome (e.g. the `daemon.reload` request that
/// `ExecReload=mentoryctl reload` sends), queued with `SIGHUP`s for one ``ReloadService``.
///
/// At most ``capacity`` reloads wait at once; a request beyond that fails at once with
/// ``ReloadRequestError/busy``, and a signal beyond it is dropped (a reload is already queued).
public struct ReloadRequests: Sendable {
    /// The most reloads waiting at once.
    public static let capacity = 4

    struct Request: Sendable {
        var trigger: String
        var reply: CheckedContinuation<Void, any Error>?
    }

    let stream: AsyncStream<Request>
    private let continuation: AsyncStream<Request>.Continuation

    public init() {
        (self.stream, self.continuation) = AsyncStream.makeStream(
            of: Request.self,
            bufferingPolicy: .bufferingOldest(Self.capacity)
        )
    }

    /// Reloads now and returns once the new configuration is in effect; throws why it failed.
    public func reload(trigger: String) async throws {
        try await withCheckedThrowingContinuation { (reply: CheckedContinuation<Void, any Error>) in
            switch self.continuation.yield(Request(trigger: trigger, reply: reply)) {
            case .enqueued:
                break
            case .dropped:
                reply.resume(throwing: ReloadRequestError.busy)
            case .terminated:
                reply.resume(throwing: ReloadRequestError.stopped)
            @unknown default:
                reply.resume(throwing: ReloadRequestError.stopped)
            }
        }
    }

    func enqueueSignal(_ signal: String) {
        _ = self.continuation.yield(Request(trigger: signal, reply: nil))
    }

    /// Ends the queue; requests still waiting fail with ``ReloadRequestError/stopped``.
    func finish() {
        self.continuation.finish()
    }
}

/// Why a requested reload did not run.
public enum ReloadRequestError: Error, Sendable, CustomStringConvertible {
    /// ``ReloadRequests/capacity`` reloads are already waiting.
    case busy
    /// The daemon is shutting down.
    case stopped

    public var description: String {
        switch self {
        case .busy: "\(ReloadRequests.capacity) reloads are already waiting; try again when they are done"
        case .stopped: "mentoryd is shutting down and reloads no more"
        }
    }
}
