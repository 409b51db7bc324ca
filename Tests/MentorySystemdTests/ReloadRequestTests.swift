import Logging
import MentorySystemd
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing
import UnixSignals

@Suite("Requested reloads")
struct ReloadRequestTests {
    let logger = Logger(label: "test")

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
