import Logging
import ServiceLifecycle

/// The daemon's resources (the event loop, the store, the handlers), opened one after the other
/// before its long-lived services run, and closed in the reverse order once they have ended.
///
/// As Hummingbird's `PreludeService` runs its prelude before the service it wraps, ``PreludeService``
/// runs a body that opens the resources with ``open(_:closeDeadline:_:close:)`` and then runs the
/// long-lived services as a `ServiceGroup` of their own, which stops them last to first; the prelude
/// then closes what it opened, last to first, on every way out of the body:
/// - the body returns (the services ended, on graceful shutdown or because one of them ended);
/// - the body throws (a resource failed to open half-way, a service failed): the resources opened
///   before the failure close, and the error goes on;
/// - graceful shutdown (`SIGTERM`) comes while the prelude is still opening: the open under way
///   finishes, the next one is not attempted (``open(_:closeDeadline:_:close:)`` throws
///   ``ShutDownDuringStartUp``), and what was opened closes; the service then returns normally;
/// - cancellation: the same, and each close still runs to its end, within the group's
///   `maximumCancellationDuration`.
///
/// Nothing runs outside this structure: every open and close runs in the task that runs the
/// service, and a close that overruns its deadline is logged and awaited, never left behind, so
/// that no resource closes while one opened after it is still closing.
struct Prelude: Sendable {
    /// A resource opened so far, with how to close it.
    private struct Opened: Sendable {
        var name: String
        var closeDeadline: Duration
        var close: @Sendable () async -> Void
    }

    /// Graceful shutdown (or cancellation) came before every resource was open; nothing more opens.
    struct ShutDownDuringStartUp: Error {}

    private var opened: [Opened] = []
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// The names of the resources opened so far, in the order they opened.
    var openedNames: [String] { self.opened.map(\.name) }

    /// Opens one resource after those opened before it, unless graceful shutdown or cancellation
    /// came first (then throws ``ShutDownDuringStartUp`` without opening anything).
    ///
    /// `open` cleans up what it did before it throws; `close` runs once the body has ended, after
    /// every resource opened later has closed.
    mutating func open<Resource: Sendable>(
        _ name: String,
        closeDeadline: Duration,
        _ open: () async throws -> Resource,
        close: @escaping @Sendable (Resource) async -> Void
    ) async throws -> Resource {
        guard !Task.isShuttingDownGracefully, !Task.isCancelled else {
            self.logger.debug("resource never opened", metadata: ["resource": "\(name)"])
            throw ShutDownDuringStartUp()
        }
        let resource = try await open()
        self.logger.debug("resource opened", metadata: ["resource": "\(name)"])
        self.opened.append(Opened(name: name, closeDeadline: closeDeadline, close: { await close(resource) }))
        return resource
    }

    /// Whether graceful shutdown or cancellation came, so that the body should stop before it runs
    /// its services.
    var isStopping: Bool { Task.isShuttingDownGracefully || Task.isCancelled }

    /// Closes every resource opened so far, last to first, each within its deadline (logged when
    /// overrun, and still awaited).
    mutating func closeAll() async {
        while let resource = self.opened.popLast() {
            await Self.close(resource, logger: self.logger)
        }
    }

    private static func close(_ resource: Opened, logger: Logger) async {
        // The close and a timer race; the close is awaited whatever the timer says. A timer whose
        // sleep is cancelled (the task was cancelled) says nothing.
        await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                await resource.close()
                return true
            }
            group.addTask {
                do {
                    try await Task.sleep(for: resource.closeDeadline)
                    return false
                } catch {
                    return nil
                }
            }
            while let finished = await group.next() {
                if finished == true {
                    group.cancelAll()
                } else if finished == false {
                    logger.error(
                        "closing overran its deadline; waiting for it before closing what was opened before it",
                        metadata: ["resource": "\(resource.name)", "deadline": "\(resource.closeDeadline)"]
                    )
                }
            }
        }
        logger.debug("resource closed", metadata: ["resource": "\(resource.name)"])
    }

    /// Runs `body` with a new prelude, then closes what it opened, last to first, whether `body`
    /// returned or threw. Returns normally when `body` stopped at ``ShutDownDuringStartUp``.
    static func run(logger: Logger, _ body: (inout Prelude) async throws -> Void) async throws {
        var prelude = Prelude(logger: logger)
        do {
            try await body(&prelude)
        } catch {
            await prelude.closeAll()
            if error is ShutDownDuringStartUp { return }
            throw error
        }
        await prelude.closeAll()
    }
}

/// A service that runs a ``Prelude``: its body opens the resources in order and then runs the
/// long-lived services (``runServices(_:logger:)``); once they end, the resources close in reverse.
///
/// It is the one service of the daemon's top-level `ServiceGroup`, which traps the signals: so
/// `SIGTERM` during the prelude stops start-up after the open under way, and `SIGTERM` later
/// reaches the long-lived services' own group, which stops them last to first before the prelude
/// unwinds.
struct PreludeService: Service {
    var logger: Logger
    var body: @Sendable (inout Prelude) async throws -> Void

    func run() async throws {
        try await Prelude.run(logger: self.logger, self.body)
    }

    /// Runs `services` as a `ServiceGroup` that follows this service's graceful shutdown: it starts
    /// them in order and stops them last to first. Each one, ending or failing, shuts the group
    /// down gracefully; the first error is what this throws. Returns at once, running nothing,
    /// when graceful shutdown or cancellation already came.
    static func runServices(
        _ services: [ServiceGroupConfiguration.ServiceConfiguration], logger: Logger
    ) async throws {
        guard !Task.isShuttingDownGracefully, !Task.isCancelled else { return }
        try await ServiceGroup(configuration: .init(services: services, logger: logger)).run()
    }

    /// A service of the group: ending or failing shuts the group down gracefully, in order.
    ///
    /// Named here: without a name, the group names a service with "\(service)", whose reflection
    /// (a conformance scan of the whole binary for each type it meets) costs start-up over a millisecond.
    static func member(_ service: some Service, _ name: String) -> ServiceGroupConfiguration.ServiceConfiguration {
        .init(
            service: service,
            successTerminationBehavior: .gracefullyShutdownGroup,
            failureTerminationBehavior: .gracefullyShutdownGroup,
            serviceName: name
        )
    }
}
