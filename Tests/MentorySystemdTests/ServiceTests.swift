#if canImport(Glibc)
    import Glibc
#endif
import Logging
import MentorySystemd
import MentoryTestSupport
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing
import UnixSignals

@Suite("systemd services", .serialized)
struct ServiceTests {
    let logger = Logger(label: "MentorySystemdTests")

    @Test("the watchdog pings only after the probe answers, and stops while it hangs")
    func watchdogFollowsTheProbe() async throws {
        let socket = try NotifySocketFixture()
        let gate = TestGate(open: false)
        let watchdog = WatchdogService(
            notifier: SystemdNotifier(socketAddress: socket.address),
            timeout: .milliseconds(200),
            logger: self.logger,
            probe: { await gate.pass() }
        )
        #expect(watchdog.pingInterval == .milliseconds(100))
        let task = Task { try await watchdog.run() }
        defer { task.cancel() }

        // The first probe hangs: several ping intervals pass without a ping.
        while await gate.arrivals == 0 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(!socket.hasPendingDatagram(), "no WATCHDOG=1 while the engine does not answer")

        // Once it answers, pings resume, each after a probe.
        await gate.open()
        #expect(await socket.receive() == "WATCHDOG=1")
        #expect(await socket.receive() == "WATCHDOG=1")
        #expect(await gate.arrivals >= 2)
        task.cancel()
        try? await task.value
    }

    @Test("without a watchdog timeout the service sends nothing and ends on graceful shutdown")
    func watchdogDisabled() async throws {
        let socket = try NotifySocketFixture()
        let watchdog = WatchdogService(
            notifier: SystemdNotifier(socketAddress: socket.address),
            timeout: nil,
            logger: self.logger,
            probe: {}
        )
        try await testGracefulShutdown { trigger in
            let task = Task { try await watchdog.run() }
            try await Task.sleep(for: .milliseconds(100))
            trigger.triggerGracefulShutdown()
            try await task.value
        }
        #expect(!socket.hasPendingDatagram())
    }

    @Test("the status service sends changed STATUS= lines, then STOPPING=1 on graceful shutdown")
    func statusAndStopping() async throws {
        let socket = try NotifySocketFixture()
        let status = StatusService(
            notifier: SystemdNotifier(socketAddress: socket.address),
            interval: .milliseconds(20),
            logger: self.logger,
            status: { "Serving 0 connections, 0 subscribers" }
        )
        try await testGracefulShutdown { trigger in
            let task = Task { try await status.run() }
            #expect(await socket.receive() == "STATUS=Serving 0 connections, 0 subscribers")
            // An unchanged line is not sent again.
            try await Task.sleep(for: .milliseconds(100))
            #expect(!socket.hasPendingDatagram())
            trigger.triggerGracefulShutdown()
            try await task.value
        }
        #expect(await socket.receive() == "STOPPING=1\nSTATUS=Shutting down")
    }

    @Test(
        "a signal reloads: RELOADING=1 with MONOTONIC_USEC, the reload, then READY=1; a failed reload keeps the old configuration"
    )
    func reload() async throws {
        struct ReloadFailed: Error {}
        let socket = try NotifySocketFixture()
        // SIGUSR2 stands in for SIGHUP, which the test runner's own handling must not see.
        let signals = await UnixSignalsSequence(trapping: .sigusr2)
        let (applied, appliedContinuation) = AsyncStream.makeStream(of: Int.self)
        let reload = ReloadService(
            notifier: SystemdNotifier(socketAddress: socket.address),
            signals: signals,
            initial: 1,
            logger: self.logger,
            readyStatus: { "reloaded" },
            reload: { current in
                appliedContinuation.yield(current)
                if current == 2 { throw ReloadFailed() }
                return current + 1
            }
        )
        try await testGracefulShutdown { trigger in
            let task = Task { try await reload.run() }
            var reloads = applied.makeAsyncIterator()

            kill(getpid(), SIGUSR2)
            let reloading = try #require(await socket.receive())
            #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
            #expect(UInt64(reloading.split(separator: "=").last ?? "") != nil)
            #expect(await reloads.next() == 1)
            #expect(await socket.receive() == "READY=1\nSTATUS=reloaded")

            // The second reload fails: the daemon stays ready with configuration 2.
            kill(getpid(), SIGUSR2)
            #expect(await socket.receive()?.hasPrefix("RELOADING=1") == true)
            #expect(await reloads.next() == 2)
            #expect(await socket.receive() == "READY=1\nSTATUS=reloaded")

            kill(getpid(), SIGUSR2)
            #expect(await socket.receive()?.hasPrefix("RELOADING=1") == true)
            #expect(await reloads.next() == 2, "the failed reload left configuration 2 in effect")
            #expect(await socket.receive() == "READY=1\nSTATUS=reloaded")

            trigger.triggerGracefulShutdown()
            try await task.value
        }
    }
}
