import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@testable import MentoryDaemonKit

/// What the resources and services did, in order.
private actor Record {
    private(set) var events: [String] = []
    /// Fired once `services` services have started.
    private let allStarted: (services: Int, signal: Signal)?

    init(allStarted: (services: Int, signal: Signal)? = nil) {
        self.allStarted = allStarted
    }

    func append(_ event: String) {
        self.events.append(event)
        if let allStarted, event.hasPrefix("start "), self.started.count == allStarted.services {
            allStarted.signal.fire()
        }
    }
    func with(prefix: String) -> [String] {
        self.events.filter { $0.hasPrefix(prefix + " ") }.map { String($0.dropFirst(prefix.count + 1)) }
    }
    var opened: [String] { self.with(prefix: "open") }
    var closed: [String] { self.with(prefix: "close") }
    var started: [String] { self.with(prefix: "start") }
    var stopped: [String] { self.with(prefix: "stop") }
}

/// A one-shot signal for a test to wait on.
private struct Signal: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (self.stream, self.continuation) = AsyncStream<Void>.makeStream()
    }

    func fire() { self.continuation.finish() }

    func wait() async {
        for await _ in self.stream {}
    }
}

private struct OpenFailed: Error {}
private struct ServiceFailed: Error {}

/// Records its start, then runs until graceful shutdown (or cancellation), or fails once `fail` fires.
private struct RecordingService: Service {
    let name: String
    let record: Record
    var fail: Signal?

    func run() async throws {
        await self.record.append("start \(self.name)")
        guard let fail = self.fail else {
            try? await gracefulShutdown()
            await self.record.append("stop \(self.name)")
            return
        }
        let failed = await withGracefulShutdownHandler {
            await fail.wait()
            return !Task.isShuttingDownGracefully
        } onGracefulShutdown: {
            fail.fire()
        }
        await self.record.append("stop \(self.name)")
        if failed { throw ServiceFailed() }
    }
}

/// Fires `signal` when a message holding `phrase` is logged.
private struct SignallingLogHandler: LogHandler {
    let phrase: String
    let signal: Signal
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.message.description.contains(self.phrase) { self.signal.fire() }
    }
}

/// A daemon in miniature: resources opened by a prelude, then services in a group of their own.
private struct Daemonette {
    enum Behaviour {
        /// Opens at once.
        case plain
        /// Throws from its open.
        case failsToOpen
        /// Its open ends only once graceful shutdown (or cancellation) reached the prelude.
        case opensUntilShutdown
        /// Its close outlasts its deadline: it ends only once `release` fires.
        case slowClose(release: Signal)
    }

    let resources = ["event loop", "store", "handlers"]
    static let serviceNames = ["verification", "watchdog", "server", "reload", "status"]
    let services = Daemonette.serviceNames
    let record: Record
    /// Fired once every service has started: the group starts them in order, but each runs in a task of its
    /// own, so they may record their starts in any order.
    let allStarted: Signal
    let opening = Signal()
    var behaviours: [String: Behaviour] = [:]
    var failingService: (name: String, fail: Signal)?
    var logger = Logger(label: "test")

    init() {
        let allStarted = Signal()
        self.allStarted = allStarted
        self.record = Record(allStarted: (Daemonette.serviceNames.count, allStarted))
    }

    func group() -> ServiceGroup {
        let record = self.record
        let behaviours = self.behaviours
        let resources = self.resources
        var services = self.services.map { RecordingService(name: $0, record: record) }
        if let failing = self.failingService, let index = services.firstIndex(where: { $0.name == failing.name }) {
            services[index].fail = failing.fail
        }
        let members = services.map { PreludeService.member($0, $0.name) }
        let opening = self.opening
        let logger = self.logger
        let daemon = PreludeService(logger: logger) { prelude in
            for name in resources {
                let behaviour = behaviours[name] ?? .plain
                // Only a slow close has a deadline short enough to pass.
                var deadline = Duration.seconds(600)
                if case .slowClose = behaviour { deadline = .milliseconds(1) }
                try await prelude.open(name, closeDeadline: deadline) {
                    switch behaviour {
                    case .failsToOpen: throw OpenFailed()
                    case .opensUntilShutdown:
                        let shutdown = Signal()
                        opening.fire()
                        await withGracefulShutdownHandler {
                            await shutdown.wait()
                        } onGracefulShutdown: {
                            shutdown.fire()
                        }
                    case .plain, .slowClose: break
                    }
                    await record.append("open \(name)")
                } close: { _ in
                    if case .slowClose(let release) = behaviour { await release.wait() }
                    await record.append("close \(name)")
                }
            }
            try await PreludeService.runServices(members, logger: logger)
        }
        return ServiceGroup(
            configuration: .init(
                services: [PreludeService.member(daemon, "prelude")], gracefulShutdownSignals: [],
                logger: Logger(label: "test")))
    }

    /// The services stopped last to first (a failing one first), then the resources closed last to first.
    func expectEveryoneStoppedInReverse() async {
        #expect(await self.record.opened == self.resources)
        #expect(await self.record.started.sorted() == self.services.sorted())
        var stopped = Array(self.services.reversed())
        if let failing = self.failingService?.name {
            stopped.removeAll { $0 == failing }
            stopped.insert(failing, at: 0)
        }
        #expect(await self.record.stopped == stopped)
        #expect(await self.record.closed == self.resources.reversed())
        let events = await self.record.events
        let lastStop = events.lastIndex { $0.hasPrefix("stop ") }
        let firstClose = events.firstIndex { $0.hasPrefix("close ") }
        #expect(lastStop != nil && firstClose != nil && lastStop! < firstClose!, "\(events)")
    }
}

@Suite("The daemon's prelude: resources opened in order, services after them, all closed in reverse on every exit path")
struct PreludeTests {
    @Test("graceful shutdown (as on SIGTERM): the services stop last to first, then the resources close in reverse")
    func gracefulShutdown() async throws {
        let daemon = Daemonette()
        try await testGracefulShutdown { trigger in
            let group = daemon.group()
            async let run: Void = group.run()
            await daemon.allStarted.wait()
            trigger.triggerGracefulShutdown()
            try await run
        }
        await daemon.expectEveryoneStoppedInReverse()
    }

    @Test("a resource failing to open half-way: the later ones never open, no service starts, the earlier close")
    func startupFailsHalfway() async throws {
        var daemon = Daemonette()
        daemon.behaviours["handlers"] = .failsToOpen
        await #expect(throws: OpenFailed.self) { try await daemon.group().run() }
        #expect(await daemon.record.opened == ["event loop", "store"])
        #expect(await daemon.record.started.isEmpty)
        #expect(await daemon.record.closed == ["store", "event loop"])
    }

    @Test("graceful shutdown during start-up: the open under way finishes, nothing after it opens, all close")
    func shutdownDuringStartup() async throws {
        var daemon = Daemonette()
        daemon.behaviours["store"] = .opensUntilShutdown
        try await testGracefulShutdown { trigger in
            let group = daemon.group()
            async let run: Void = group.run()
            await daemon.opening.wait()
            trigger.triggerGracefulShutdown()
            try await run
        }
        #expect(await daemon.record.opened == ["event loop", "store"])
        #expect(await daemon.record.started.isEmpty)
        #expect(await daemon.record.closed == ["store", "event loop"])
    }

    @Test("graceful shutdown before the group runs: the group ends normally, whatever opened closes in reverse")
    func shutdownBeforeStart() async throws {
        let daemon = Daemonette()
        try await testGracefulShutdown { trigger in
            trigger.triggerGracefulShutdown()
            try await daemon.group().run()
        }
        // How far start-up got depends on when the group passed the shutdown on to the prelude.
        let opened = await daemon.record.opened
        #expect(daemon.resources.starts(with: opened))
        #expect(await daemon.record.closed == opened.reversed())
        let started = await daemon.record.started
        #expect(await daemon.record.stopped == daemon.services.reversed().filter(started.contains))
    }

    @Test("a service failing while serving: the others stop last to first, the resources close in reverse")
    func serviceFails() async throws {
        var daemon = Daemonette()
        let fail = Signal()
        daemon.failingService = ("server", fail)
        let group = daemon.group()
        async let run: Void = group.run()
        await daemon.allStarted.wait()
        fail.fire()
        let error: (any Error)?
        do {
            try await run
            error = nil
        } catch let caught {
            error = caught
        }
        #expect(error is ServiceFailed)
        await daemon.expectEveryoneStoppedInReverse()
    }

    @Test("cancelling the group: the services end, then the resources still close in reverse")
    func cancelled() async throws {
        let daemon = Daemonette()
        let group = daemon.group()
        let run = Task { try await group.run() }
        await daemon.allStarted.wait()
        run.cancel()
        _ = try? await run.value
        #expect(await daemon.record.closed == daemon.resources.reversed())
        let events = await daemon.record.events
        let lastStop = events.lastIndex { $0.hasPrefix("stop ") }
        let firstClose = events.firstIndex { $0.hasPrefix("close ") }
        #expect(lastStop != nil && firstClose != nil && lastStop! < firstClose!, "\(events)")
    }

    @Test("a close overrunning its deadline is waited for: what opened before it closes only after it")
    func closeOverrunsDeadline() async throws {
        var daemon = Daemonette()
        let release = Signal()
        let overran = Signal()
        daemon.behaviours["store"] = .slowClose(release: release)
        daemon.logger = Logger(label: "test") { _ in SignallingLogHandler(phrase: "overran", signal: overran) }
        try await testGracefulShutdown { trigger in
            let group = daemon.group()
            async let run: Void = group.run()
            await daemon.allStarted.wait()
            trigger.triggerGracefulShutdown()
            // The store's close waits until its 1 ms deadline has passed and been logged.
            await overran.wait()
            #expect(await daemon.record.closed == ["handlers"])
            release.fire()
            try await run
        }
        await daemon.expectEveryoneStoppedInReverse()
    }
}
