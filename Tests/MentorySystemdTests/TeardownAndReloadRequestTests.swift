import Logging
import MentorySystemd
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing
import UnixSignals

/// What ran, in order.
private actor Record {
    private(set) var names: [String] = []
    func append(_ name: String) { self.names.append(name) }
}

@Suite("Ordered teardown and requested reloads")
struct TeardownAndReloadRequestTests {
    let logger = Logger(label: "test")

    @Test("teardown runs the steps last to first, each once")
    func reverseOrder() async {
        let record = Record()
        var teardown = OrderedTeardown(logger: self.logger)
        for name in ["event loop", "store", "handlers"] {
            teardown.add(name, deadline: .seconds(30)) { await record.append(name) }
        }
        #expect(await teardown.run().isEmpty)
        #expect(await record.names == ["handlers", "store", "event loop"])
        #expect(await teardown.run().isEmpty)
        #expect(await record.names.count == 3, "a second run does nothing")
    }

    @Test("a step that overruns its deadline is reported and the earlier steps still run")
    func overrunningStep() async {
        let record = Record()
        let (stuck, release) = AsyncStream.makeStream(of: Void.self)
        var teardown = OrderedTeardown(logger: self.logger)
        teardown.add("store", deadline: .seconds(30)) { await record.append("store") }
        teardown.add("handlers", deadline: .milliseconds(50)) {
            for await _ in stuck {}
            await record.append("handlers")
        }
        #expect(await teardown.run() == ["handlers"])
        #expect(await record.names == ["store"])
        release.finish()
    }

    @Test("a requested reload answers with its outcome; a failed one throws why and keeps the configuration")
    func requestedReload() async throws {
        struct Broken: Error {}
        let requests = ReloadRequests()
        // SIGUSR1 is never sent here: only requests trigger reloads.
        let signals = await UnixSignalsSequence(trapping: .sigusr1)
        let (applied, appliedContinuation) = AsyncStream.makeStream(of: Int.self)
        let service = ReloadService(
            notifier: SystemdNotifier(socketAddress: nil),
            signals: signals,
            requests: requests,
            initial: 1,
            logger: self.logger,
            reload: { current in
                appliedContinuation.yield(current)
                if current == 2 { throw Broken() }
                return current + 1
            }
        )
        try await testGracefulShutdown { trigger in
            let task = Task { try await service.run() }
            try await requests.reload(trigger: "test")
            await #expect(throws: Broken.self) { try await requests.reload(trigger: "test") }
            await #expect(throws: Broken.self) { try await requests.reload(trigger: "test") }
            var reloads = applied.makeAsyncIterator()
            #expect(await reloads.next() == 1)
            #expect(await reloads.next() == 2)
            #expect(await reloads.next() == 2, "the failed reload left configuration 2 in effect")
            trigger.triggerGracefulShutdown()
            try await task.value
            // After shut-down a request fails at once instead of waiting forever.
            await #expect(throws: ReloadRequestError.self) { try await requests.reload(trigger: "late") }
        }
    }
}
