import Foundation
import Glibc
import MentoryAdvisor
import MentoryClient
import MentoryTestSupport
import MentoryWire
import NIOConcurrencyHelpers
import Testing

/// A resumable subscription consumed in the background, its updates collected for the test to poll.
final class CollectedWatch: Sendable {
    /// What the consuming task found, shared with it.
    final class Collected: Sendable {
        let updates = NIOLockedValueBox<[SubscriptionUpdate]>([])
        let failure = NIOLockedValueBox<String?>(nil)
    }

    private let collected = Collected()
    private let task: Task<Void, Never>

    init(socketPath: String, topics: [String]) {
        let subscription = MentoryClient.resumableSubscription(
            socketPath: socketPath, clientName: "watcher", topics: topics,
            reconnect: ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(1)))
        let collected = self.collected
        self.task = Task {
            do {
                for try await update in subscription {
                    collected.updates.withLockedValue { $0.append(update) }
                }
            } catch {
                collected.failure.withLockedValue { $0 = "\(error)" }
            }
        }
    }

    /// How many times the subscription was (re)established.
    var connections: Int {
        self.collected.updates.withLockedValue { $0.count(where: { if case .connected = $0 { true } else { false } }) }
    }

    /// The events received so far, in order.
    var events: [Mentory_V1_Event] {
        self.collected.updates.withLockedValue {
            $0.compactMap { if case .event(let event) = $0 { event } else { nil } }
        }
    }

    /// Waits (at most 60 s) until `condition` holds; records an issue when it never does or the watch gave up.
    func wait(
        for what: String, sourceLocation: SourceLocation = #_sourceLocation,
        until condition: (CollectedWatch) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let failure = self.collected.failure.withLockedValue({ $0 }) {
                Issue.record("the watcher gave up: \(failure)", sourceLocation: sourceLocation)
                return
            }
            if condition(self) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the watcher never saw \(what)", sourceLocation: sourceLocation)
    }

    func stop() async {
        self.task.cancel()
        await self.task.value
    }
}

/// A watcher of a plugin's topic never gives up, whatever the order of daemon restart, plugin
/// restart and reconnect: real daemon processes, a real plugin process (mentory-advisor, topic `advice`).
@Suite("Watchers of a plugin topic across restarts", .timeLimit(.minutes(10)))
struct PluginWatcherRestartTests {
    static let environment = ["MENTORYD_STORAGE_BACKEND": "memory"]
    static let config = #"{"plugins": {"advisor": {}}}"#

    static func suggest(_ client: MentoryClient, _ text: String) async throws -> Mentory_Advisor_V1_Advice {
        var request = Mentory_Advisor_V1_SuggestRequest()
        request.emotion = .neutral
        request.text = text
        return try await client.call(MentoryAdvisorSchema.Advisor.suggest, request)
    }

    /// Whether `watch` received an `advice` event whose advice is `advice`.
    static func received(_ advice: Mentory_Advisor_V1_Advice, _ watch: CollectedWatch) -> Bool {
        watch.events.contains { event in
            event.topic == "advice" && (try? Mentory_Advisor_V1_Advice(serializedBytes: event.body)) == advice
        }
    }

    static func kill(_ process: Process) async {
        Glibc.kill(process.processIdentifier, SIGKILL)
        _ = await process.waitForExit()
    }

    /// A daemon, the advisor registered, and a watcher of `advice` that got its snapshot.
    static func start() async throws -> (DaemonProcess, Process, CollectedWatch) {
        let daemon = try await DaemonProcess(environment: Self.environment, config: Self.config)
        let advisor = try await AdvisorEndToEndTests.startAdvisor(socketPath: daemon.socketPath)
        let client = try await daemon.client()
        try await AdvisorEndToEndTests.waitFor(.connected, client)
        await client.close()
        let watch = CollectedWatch(socketPath: daemon.socketPath, topics: ["advice"])
        try await watch.wait(for: "the snapshot") { $0.events.first?.kind == .snapshot }
        return (daemon, advisor, watch)
    }

    /// A second daemon on the first one's socket and state directory.
    static func restart(_ first: DaemonProcess) async throws -> DaemonProcess {
        #expect(await first.stop() == 0)
        return try await DaemonProcess(
            socketPath: first.socketPath, stateDirectory: first.directory + "/state",
            environment: Self.environment, config: Self.config)
    }

    @Test("the daemon restarts and the watcher reconnects before the plugin returns: held, then a reset and changes")
    func daemonRestartBeforePlugin() async throws {
        let (first, advisor, watch) = try await Self.start()
        defer { first.removeFiles() }
        await Self.kill(advisor)
        let second = try await Self.restart(first)
        defer { second.removeFiles() }
        // Reconnected and subscribed while the advisor is absent: the subscription is held.
        try await watch.wait(for: "a second connection") { $0.connections >= 2 }
        let client = try await second.client()
        #expect(try await client.status().plugins.first?.state == .waiting)
        let described = try await client.call(
            MentorySchema.Session.describe, Mentory_V1_DescribeRequest.with { $0.namespace = "advisor" })
        #expect(described.namespaces.first?.topics.map(\.name) == ["advice"])
        #expect(described.namespaces.first?.methods.map(\.name) == ["suggest"])
        // A call names the absent plugin; a new subscription is accepted, not refused.
        do {
            _ = try await Self.suggest(client, "anyone?")
            Issue.record("an absent advisor answered")
        } catch {
            #expect((error as? MentoryClientError)?.remoteCode == .unavailable)
            #expect("\(error)".contains("plugin 'advisor' is not connected"), "\(error)")
        }
        _ = try await client.subscribe(topics: ["advice"])

        let eventsBefore = watch.events.count
        let again = try await AdvisorEndToEndTests.startAdvisor(socketPath: second.socketPath)
        defer { Glibc.kill(again.processIdentifier, SIGKILL) }
        try await AdvisorEndToEndTests.waitFor(.connected, client)
        try await watch.wait(for: "a reset") { $0.events.dropFirst(eventsBefore).contains { $0.kind == .reset } }
        let advice = try await Self.suggest(client, "slept well")
        try await watch.wait(for: "the new advice") { Self.received(advice, $0) }
        await watch.stop()
        await client.close()
        #expect(await second.stop() == 0)
    }

    @Test("the plugin restarts: the watcher stays subscribed and gets a reset, then changes")
    func pluginRestart() async throws {
        let (daemon, advisor, watch) = try await Self.start()
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        await Self.kill(advisor)
        try await AdvisorEndToEndTests.waitFor(.waiting, client)
        // While it is away, a new subscriber is accepted too (no UNAVAILABLE), and plain mentoryctl
        // watch (every described topic, `advice` included) streams the built-in topics' snapshots.
        let other = try await daemon.client("other")
        _ = try await other.subscribe(topics: ["advice"])
        let watched = try await daemon.ctl(["watch", "--count", "3", "--json"])
        #expect(watched.status == 0, "\(watched.stderr)")
        let topics = watched.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["topic"] as? String
        }
        #expect(Set(topics) == ["mentor", "reachability", "diary"], "\(watched.stdout)")
        let again = try await AdvisorEndToEndTests.startAdvisor(socketPath: daemon.socketPath)
        defer { Glibc.kill(again.processIdentifier, SIGKILL) }
        try await AdvisorEndToEndTests.waitFor(.connected, client)
        try await watch.wait(for: "a reset") { $0.events.contains { $0.kind == .reset } }
        var otherEvents = other.events.makeAsyncIterator()
        #expect(await otherEvents.next()?.kind == .reset)
        let advice = try await Self.suggest(client, "a long day at work")
        try await watch.wait(for: "the new advice") { Self.received(advice, $0) }
        #expect(watch.connections == 1)
        await watch.stop()
        await other.close()
        await client.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("daemon and plugin restart at once: the watcher comes back with both")
    func bothRestart() async throws {
        let (first, advisor, watch) = try await Self.start()
        defer { first.removeFiles() }
        await Self.kill(advisor)
        #expect(await first.stop() == 0)
        // The advisor starts first and waits for the daemon, as after a reboot in any order.
        let again = try await AdvisorEndToEndTests.startAdvisor(socketPath: first.socketPath)
        defer { Glibc.kill(again.processIdentifier, SIGKILL) }
        let second = try await DaemonProcess(
            socketPath: first.socketPath, stateDirectory: first.directory + "/state",
            environment: Self.environment, config: Self.config)
        defer { second.removeFiles() }
        let client = try await second.client()
        try await AdvisorEndToEndTests.waitFor(.connected, client)
        try await watch.wait(for: "a second connection") { $0.connections >= 2 }
        let advice = try await Self.suggest(client, "tired and stressed")
        try await watch.wait(for: "the new advice") { Self.received(advice, $0) }
        await watch.stop()
        await client.close()
        #expect(await second.stop() == 0)
    }
}
