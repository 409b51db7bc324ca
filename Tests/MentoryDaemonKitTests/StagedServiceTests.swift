import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@testable import MentoryDaemonKit

/// What the services did, in order.
private actor Record {
    private(set) var events: [String] = []
    func append(_ event: String) { self.events.append(event) }
    var opened: [String] { self.events.filter { $0.hasPrefix("open ") }.map { String($0.dropFirst(5)) } }
    var closed: [String] { self.events.filter { $0.hasPrefix("close ") }.map { String($0.dropFirst(6)) } }
}

private struct OpenFailed: Error {}
private struct ServiceFailed: Error {}

/// Ends with an error once `fail` is set, else on graceful shutdown.
private struct FailingService: Service {
    let fail: Latch<Void>
    func run() async throws {
        if await self.fail.waitUntilGracefulShutdown() != nil { throw ServiceFailed() }
    }
}

/// Resources chained as the daemon chains its own: each opens after the one before it and closes after
/// every service after it has ended. A `FailingService` may sit among them (after `failAfter`).
private struct Chain {
    let record = Record()
    let fail = Latch<Void>()
    let allOpen = Latch<Void>()
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = []

    init(
        _ names: [String], failingOpen: String? = nil, failingServiceAfter: String? = nil,
        slowClose: Duration = .milliseconds(20)
    ) async {
        let logger = Logger(label: "test")
        let record = self.record
        let count = names.count + (failingServiceAfter == nil ? 0 : 1)
        let ended = (0..<count).map { _ in Latch<Void>() }
        var previous = Latch<Void>()
        await previous.set(())
        var index = 0
        for name in names {
            let opened = Latch<Void>()
            let position = index
            let service = ResourceService(
                name: name, after: previous, opened: opened, ended: ended[position],
                before: Array(ended[(position + 1)...]), closeDeadline: .seconds(30), logger: logger,
                open: { _ in
                    if name == failingOpen { throw OpenFailed() }
                    await record.append("open \(name)")
                },
                close: { _ in
                    // Later resources take longer to close: an order kept by luck would show.
                    try? await Task.sleep(for: slowClose * (position + 1))
                    await record.append("close \(name)")
                }
            )
            self.services.append(Self.member(service, name))
            index += 1
            previous = opened
            if name == failingServiceAfter {
                let failing = AfterLatch(after: opened, service: FailingService(fail: self.fail), ended: ended[index])
                self.services.append(Self.member(failing, "failing"))
                index += 1
            }
        }
        let last = previous
        let allOpen = self.allOpen
        Task {
            await last.wait()
            await allOpen.set(())
        }
    }

    static func member(_ service: some Service, _ name: String) -> ServiceGroupConfiguration.ServiceConfiguration {
        .init(
            service: service, successTerminationBehavior: .gracefullyShutdownGroup,
            failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: name)
    }

    func group() -> ServiceGroup {
        ServiceGroup(
            configuration: .init(services: self.services, gracefulShutdownSignals: [], logger: Logger(label: "test")))
    }
}

@Suite("The daemon's resources as services: opened in order, closed in reverse on every exit path")
struct StagedServiceTests {
    let names = ["event loop", "store", "handlers", "socket"]

    @Test("graceful shutdown (as on SIGTERM) closes the resources in the reverse of their start-up order")
    func gracefulShutdown() async throws {
        let chain = await Chain(self.names)
        try await testGracefulShutdown { trigger in
            let group = chain.group()
            let run = Task { try await group.run() }
            await chain.allOpen.wait()
            trigger.triggerGracefulShutdown()
            try await run.value
        }
        #expect(await chain.record.opened == self.names)
        #expect(await chain.record.closed == self.names.reversed())
    }

    @Test("a resource failing to open half-way: the later ones never open, the earlier close in reverse")
    func startupFailsHalfway() async throws {
        let chain = await Chain(self.names, failingOpen: "handlers")
        await #expect(throws: OpenFailed.self) { try await chain.group().run() }
        #expect(await chain.record.opened == ["event loop", "store"])
        #expect(await chain.record.closed == ["store", "event loop"])
    }

    @Test("a service in the middle failing after start-up: every resource closes in the reverse of start-up")
    func serviceInTheMiddleFails() async throws {
        let chain = await Chain(self.names, failingServiceAfter: "store")
        let group = chain.group()
        let run = Task { try await group.run() }
        await chain.allOpen.wait()
        await chain.fail.set(())
        await #expect(throws: ServiceFailed.self) { try await run.value }
        #expect(await chain.record.opened == self.names)
        #expect(await chain.record.closed == self.names.reversed())
    }

    @Test("cancelling the group, which orders nothing itself, still closes in the reverse of start-up")
    func cancelled() async throws {
        let chain = await Chain(self.names)
        let group = chain.group()
        let run = Task { try await group.run() }
        await chain.allOpen.wait()
        run.cancel()
        _ = try? await run.value
        #expect(await chain.record.closed == self.names.reversed())
    }

    @Test("graceful shutdown before a resource could open: nothing opens, nothing closes, the group ends")
    func shutdownBeforeStart() async throws {
        // The first resource waits for a latch that is never set.
        let record = Record()
        let never = Latch<Void>()
        let service = ResourceService(
            name: "store", after: never, opened: Latch<Void>(), ended: Latch<Void>(), before: [],
            closeDeadline: .seconds(1), logger: Logger(label: "test"),
            open: { _ in await record.append("open store") }, close: { _ in await record.append("close store") })
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(
                configuration: .init(
                    services: [Chain.member(service, "store")], gracefulShutdownSignals: [],
                    logger: Logger(label: "test")))
            let run = Task { try await group.run() }
            trigger.triggerGracefulShutdown()
            try await run.value
        }
        #expect(await record.events.isEmpty)
    }

    @Test("a latch answers every waiter, those before it was set and those after")
    func latch() async {
        let latch = Latch<Int>()
        async let early = latch.wait()
        await latch.set(7)
        await latch.set(8)
        #expect(await early == 7)
        #expect(await latch.wait() == 7)
        let cancelled = Task { await Latch<Int>().waitUnlessCancelled() }
        cancelled.cancel()
        #expect(await cancelled.value == nil)
    }
}
