import Logging
import ServiceLifecycle
import Synchronization

/// One resource of the daemon (the event loop, the store, the handlers) as a service of its group.
///
/// The group starts every service at once and, on graceful shutdown, signals them last to first, each
/// after the one behind it has ended. The start-up order comes from the latches: ``run()`` waits for
/// `after` (what must be open first), opens the resource, sets `opened` for the next service, waits
/// for graceful shutdown, then closes the resource, within `closeDeadline`.
///
/// On every exit path the order holds:
/// - `open` throws (start-up fails half-way): the error ends the service at once, and the group shuts
///   down the services after it (which never opened anything, still waiting for this one) and then
///   those before it, last to first. `open` cleans up what it opened before it threw.
/// - graceful shutdown before `after` is set: nothing was opened, and nothing is closed.
/// - cancellation (the group's graceful-shutdown deadline passed, or its task was cancelled): the
///   group no longer orders anything, so the service closes only once every service in `before` has
///   ended; a close runs to its end or its deadline even then.
///
/// Every service of the group, this one or ``AfterLatch``, sets its `ended` latch when its `run()`
/// returns or throws: the `before` of a resource are the `ended` latches of the services after it.
struct ResourceService<Input: Sendable, Resource: Sendable>: Service {
    /// The resource's name in log lines.
    var name: String
    /// Set by the previous resource once open; this one opens after it.
    var after: Latch<Input>
    /// Set once this resource is open, with the resource.
    var opened: Latch<Resource>
    /// Set when ``run()`` returns or throws.
    var ended: Latch<Void>
    /// The `ended` latches of the services that use this resource: it closes after all of them.
    var before: [Latch<Void>]
    /// How long closing may take before shut-down moves on and leaves it behind.
    var closeDeadline: Duration
    var logger: Logger
    var open: @Sendable (Input) async throws -> Resource
    var close: @Sendable (Resource) async -> Void

    func run() async throws {
        do {
            try await self.openServeAndClose()
        } catch {
            await self.ended.set(())
            throw error
        }
        await self.ended.set(())
    }

    private func openServeAndClose() async throws {
        guard let input = await self.after.waitUntilGracefulShutdown() else {
            self.logger.debug("resource never opened", metadata: ["resource": "\(self.name)"])
            return
        }
        let resource = try await self.open(input)
        self.logger.debug("resource opened", metadata: ["resource": "\(self.name)"])
        await self.opened.set(resource)
        // Returns on graceful shutdown, throws on cancellation: close either way.
        try? await gracefulShutdown()
        for service in self.before { await service.wait() }
        let close = self.close
        if await Self.run({ await close(resource) }, within: self.closeDeadline) {
            self.logger.debug("resource closed", metadata: ["resource": "\(self.name)"])
        } else {
            self.logger.error(
                "closing overran its deadline; moving on",
                metadata: ["resource": "\(self.name)", "deadline": "\(self.closeDeadline)"]
            )
        }
    }

    /// Runs `body` in a task of its own, which cancellation never reaches, returning `true` once it
    /// finishes or `false` once `limit` passes, whichever is first.
    static func run(_ body: @escaping @Sendable () async -> Void, within limit: Duration) async -> Bool {
        let settled = Flag()
        var timer: Task<Void, Never>?
        let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Task {
                await body()
                if settled.set() { continuation.resume(returning: true) }
            }
            timer = Task {
                try? await Task.sleep(for: limit)
                if settled.set() { continuation.resume(returning: false) }
            }
        }
        timer?.cancel()
        return finished
    }

    /// Set once; tells the first of the racing tasks that it won.
    private final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        /// True for the first caller only.
        func set() -> Bool {
            self.value.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        }
    }
}

/// A service of the daemon's group that must not start before a resource is open: runs `service`
/// once `after` is set, or nothing when graceful shutdown (or cancellation) comes first.
///
/// Sets `ended` when it returns or throws, so that the resources before it close after it (``ResourceService``).
struct AfterLatch<Input: Sendable, Wrapped: Service>: Service {
    var after: Latch<Input>
    var service: Wrapped
    var ended: Latch<Void>

    func run() async throws {
        do {
            if await self.after.waitUntilGracefulShutdown() != nil {
                try await self.service.run()
            }
        } catch {
            await self.ended.set(())
            throw error
        }
        await self.ended.set(())
    }
}

extension Latch {
    /// The value once set, or `nil` once this service is asked to shut down gracefully or cancelled.
    ///
    /// A service of a group must not end before the group asks it to (the group would take that for a
    /// failure and cancel the others), so a latch that is never set (the resource before it failed
    /// to open) leaves it waiting here until its turn to stop comes.
    nonisolated func waitUntilGracefulShutdown() async -> Value? {
        await cancelWhenGracefulShutdown { await self.waitUnlessCancelled() }
    }
}
