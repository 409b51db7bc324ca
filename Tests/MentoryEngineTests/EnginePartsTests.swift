import Foundation
import MentoryHandlerKit
import MentoryMetrics
import MentoryWire
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@testable import MentoryEngine

/// The engine's parts on their own, without the actor: the subscription hub, the access gate, the
/// plugin host and the route table.
@Suite("Engine parts")
struct EnginePartsTests {
    private let alice = PeerCredentials(pid: 10, uid: 1000, gid: 1000)
    private let bob = PeerCredentials(pid: 11, uid: 1001, gid: 1001)
    private let root = PeerCredentials(pid: 1, uid: 0, gid: 0)

    private func hub(ringCapacity: Int = 16, maxSubscriptionsPerUID: Int = 1024) -> SubscriptionHub {
        SubscriptionHub(ringCapacity: ringCapacity, ringBytes: .max, maxSubscriptionsPerUID: maxSubscriptionsPerUID)
    }

    private func resume(_ topic: String, after sequence: UInt64, epoch: UInt64) -> Mentory_V1_TopicSubscription {
        var subscription = Mentory_V1_TopicSubscription()
        subscription.topic = topic
        subscription.resumeAfter = sequence
        subscription.epoch = epoch
        return subscription
    }

    private func route(_ namespace: String, _ method: String, generation: UInt64) -> MethodRoute {
        let metrics = EngineMetrics(factory: MentoryMetricsFactory())
        return MethodRoute(
            namespace: namespace, method: method, answer: .immediate { _, _ in Mentory_V1_Empty().replyBody() },
            callableOnBehalf: true, generation: generation,
            metrics: metrics.methodMetrics(namespace: namespace, method: method, declared: [method]))
    }

    // MARK: Subscription hub

    @Test("the hub replays exactly the events a subscriber missed, while its ring still holds them")
    func hubReplaysWhatWasMissed() {
        var hub = self.hub(ringCapacity: 4)
        hub.declare("diary.changed", publishedBy: "diary")
        for index in 1...5 {
            let event = hub.publish(text: "entry \(index)", on: "diary.changed", epoch: 7)?.event
            #expect(event?.sequence == UInt64(index))
            #expect(event?.event.epoch == 7)
            #expect(event?.kind == .change)
        }
        #expect(hub.lastSequence(of: "diary.changed") == 5)
        let missed = hub.events(on: "diary.changed", after: 3)
        #expect(missed?.map(\.sequence) == [4, 5])
        #expect(missed?.map { String(decoding: $0.event.body, as: UTF8.self) } == ["entry 4", "entry 5"])
        #expect(hub.canResume(self.resume("diary.changed", after: 3, epoch: 7), epoch: 7))
        #expect(hub.canResume(self.resume("diary.changed", after: 5, epoch: 7), epoch: 7), "nothing missed")
        #expect(hub.events(on: "diary.changed", after: 5)?.isEmpty == true)
        // Event 1 left the ring of four: resuming after 0 would leave a gap.
        #expect(!hub.canResume(self.resume("diary.changed", after: 0, epoch: 7), epoch: 7))
        #expect(!hub.canResume(self.resume("diary.changed", after: 3, epoch: 8), epoch: 7), "another epoch")
        #expect(!hub.canResume(self.resume("diary.changed", after: 6, epoch: 7), epoch: 7), "from the future")
        var noPosition = Mentory_V1_TopicSubscription()
        noPosition.topic = "diary.changed"
        #expect(!hub.canResume(noPosition, epoch: 7), "a subscription naming no position starts with a snapshot")
    }

    @Test("a topic nobody publishes keeps nothing; a topic given up keeps its ring and its sequence numbers")
    func hubTopics() {
        var hub = self.hub()
        #expect(hub.publish(text: "x", on: "nobody.topic", epoch: 1) == nil)
        #expect(hub.lastSequence(of: "nobody.topic") == 0)
        hub.declare("advisor.tips", publishedBy: "advisor")
        hub.declare("diary.changed", publishedBy: "diary")
        #expect(hub.topicNames == ["advisor.tips", "diary.changed"])
        #expect(hub.owner(of: "advisor.tips") == "advisor")
        _ = hub.publish(text: "a", on: "advisor.tips", epoch: 1)
        _ = hub.publish(text: "b", on: "advisor.tips", epoch: 1)
        hub.withdraw("advisor.tips")
        #expect(hub.owner(of: "advisor.tips") == nil)
        #expect(hub.topicNames == ["diary.changed"])
        #expect(hub.lastSequence(of: "advisor.tips") == 2)
        hub.declare("advisor.tips", publishedBy: "advisor")
        #expect(hub.publish(text: "c", on: "advisor.tips", epoch: 1)?.event.sequence == 3)
        #expect(hub.positions(of: hub.topicNames).map(\.sequence) == [3, 0])
        #expect(hub.checkInvariants(attached: []))
    }

    @Test("a uid's connections together hold at most the limit; topics held already count nothing more")
    func hubLimitsSubscriptionsPerUID() throws {
        var hub = self.hub(maxSubscriptionsPerUID: 3)
        let sink = RecordingSink()
        let (first, second, other) = (ConnectionID(1), ConnectionID(2), ConnectionID(3))
        for topic in ["t1", "t2", "t3", "t4"] { hub.declare(topic, publishedBy: "ns") }
        _ = hub.subscribe(first, uid: 1000, to: "t1", delivery: .live, sink: sink)
        _ = hub.subscribe(first, uid: 1000, to: "t2", delivery: .live, sink: sink)
        // Subscribing again to a topic held already counts nothing more.
        _ = hub.subscribe(first, uid: 1000, to: "t2", delivery: .resetting, sink: sink)
        // Another uid's subscriptions are not counted toward this one's.
        _ = hub.subscribe(other, uid: 2000, to: "t3", delivery: .live, sink: sink)
        _ = hub.subscribe(other, uid: 2000, to: "t4", delivery: .live, sink: sink)
        #expect(hub.subscriptionCount(of: 1000) == 2)
        #expect(hub.subscriptionCount(of: 2000) == 2)

        try hub.checkBudget(of: 1000, adding: ["t3"], on: second)
        try hub.checkBudget(of: 1000, adding: ["t1", "t2", "t1"], on: first)
        let error = #expect(throws: MentoryError.self) {
            try hub.checkBudget(of: 1000, adding: ["t3", "t4"], on: second)
        }
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("uid 1000 holds 2 subscriptions and may hold 3") == true)
        // The refusal subscribed nothing.
        #expect(hub.count(of: second) == 0)
        #expect(hub.subscriberCount == 2)
        #expect(hub.checkInvariants(attached: [first, second, other]))
    }

    @Test("a uid's count follows its connections' subscriptions as they end, one or all at a time")
    func hubCountsSubscriptionsPerUID() throws {
        var hub = self.hub(maxSubscriptionsPerUID: 2)
        let sink = RecordingSink()
        let (first, second, anonymous) = (ConnectionID(1), ConnectionID(2), ConnectionID(3))
        for topic in ["t1", "t2"] { hub.declare(topic, publishedBy: "ns") }
        _ = hub.subscribe(first, uid: 1000, to: "t1", delivery: .live, sink: sink)
        _ = hub.subscribe(second, uid: 1000, to: "t1", delivery: .live, sink: sink)
        _ = hub.subscribe(anonymous, uid: nil, to: "t2", delivery: .live, sink: sink)
        #expect(throws: MentoryError.self) { try hub.checkBudget(of: 1000, adding: ["t2"], on: first) }
        // Ending one frees room for one.
        hub.unsubscribe(second, from: "t1")
        hub.unsubscribe(second, from: "t1")
        #expect(hub.subscriptionCount(of: 1000) == 1)
        try hub.checkBudget(of: 1000, adding: ["t2"], on: first)
        _ = hub.subscribe(first, uid: 1000, to: "t2", delivery: .live, sink: sink)
        #expect(hub.checkInvariants(attached: [first, second, anonymous]))
        // A connection going away takes all of its subscriptions out of its uid's count.
        hub.unsubscribeAll(first)
        #expect(hub.subscriptionCount(of: 1000) == 0)
        #expect(hub.checkInvariants(attached: [second, anonymous]))
        try hub.checkBudget(of: 1000, adding: ["t1", "t2"], on: second)
    }

    @Test("unsubscribing ends one subscription or all of a connection's, in both indexes")
    func hubUnsubscribes() {
        var hub = self.hub()
        let sink = RecordingSink()
        let (first, second) = (ConnectionID(1), ConnectionID(2))
        for topic in ["t1", "t2"] { hub.declare(topic, publishedBy: "ns") }
        _ = hub.subscribe(first, uid: 1000, to: "t1", delivery: .live, sink: sink)
        _ = hub.subscribe(first, uid: 1000, to: "t2", delivery: .live, sink: sink)
        _ = hub.subscribe(second, uid: 1000, to: "t1", delivery: .live, sink: sink)
        #expect(hub.subscribers(of: "t1") == [first, second])

        hub.unsubscribe(first, from: "t1")
        #expect(hub.topics(of: first) == ["t2"])
        #expect(hub.subscribers(of: "t1") == [second])
        #expect(hub.deliveries(of: "t1")?.keys.sorted { $0.rawValue < $1.rawValue } == [second])
        #expect(hub.entry(first, "t1") == nil)
        #expect(hub.checkInvariants(attached: [first, second]))

        hub.unsubscribeAll(second)
        #expect(hub.deliveries(of: "t1") == nil, "no topic is kept without subscribers")
        #expect(hub.subscriberCount == 1)
        hub.unsubscribeAll(first)
        #expect(hub.subscriberCount == 0)
        #expect(hub.checkInvariants(attached: []))
    }

    @Test("a publisher's absence holds its subscribers; its return resets them, one reset at a time")
    func hubHoldsAndResets() {
        var hub = self.hub()
        let sink = RecordingSink()
        let (live, overflowed, resetting) = (ConnectionID(1), ConnectionID(2), ConnectionID(3))
        hub.declare("advisor.tips", publishedBy: "advisor")
        let first = hub.subscribe(live, uid: nil, to: "advisor.tips", delivery: .live, sink: sink)
        _ = hub.subscribe(overflowed, uid: nil, to: "advisor.tips", delivery: .overflowed, sink: sink)
        let inFlight = hub.subscribe(resetting, uid: nil, to: "advisor.tips", delivery: .resetting, sink: sink)

        hub.holdSubscribers(of: "advisor.tips")
        #expect(hub.entry(live, "advisor.tips")?.delivery == .held)
        #expect(hub.entry(overflowed, "advisor.tips")?.delivery == .held)
        #expect(hub.entry(resetting, "advisor.tips") == .init(delivery: .resetting, generation: inFlight))

        let reset = hub.beginForcedReset(live, "advisor.tips")
        #expect(reset != nil && reset! > first)
        #expect(hub.entry(live, "advisor.tips") == .init(delivery: .resetting, generation: reset!))
        #expect(hub.beginForcedReset(live, "advisor.tips") == nil, "a reset is in flight already")
        #expect(hub.beginForcedReset(resetting, "advisor.tips") == nil)
        #expect(hub.beginForcedReset(ConnectionID(9), "advisor.tips") == nil)
        #expect(hub.deliveries(of: "advisor.tips")?[live]?.delivery == .resetting)
        #expect(hub.checkInvariants(attached: [live, overflowed, resetting]))
    }

    // MARK: Access gate

    @Test("the gate decides by the policy in force, trusting root and the daemon's user")
    func gateDecides() throws {
        let policy = try AccessPolicy(parsing: ["deny uid=1000 diary.* subscribe:diary.changed"])
        let gate = AccessGate(policy: policy, daemonUID: 1000 + 5)
        #expect(!gate.allowsCall(self.alice, namespace: "diary", method: "get"))
        #expect(gate.allowsCall(self.alice, namespace: "mentor", method: "get"))
        #expect(gate.allowsCall(self.bob, namespace: "diary", method: "get"))
        #expect(gate.allowsCall(self.root, namespace: "diary", method: "get"))
        #expect(gate.allowsCall(PeerCredentials(pid: 3, uid: 1005, gid: 1005), namespace: "diary", method: "get"))
        #expect(!gate.allowsCall(nil, namespace: "diary", method: "get"), "unknown credentials fail closed")
        #expect(!gate.allowsSubscription(self.alice, topic: "diary.changed"))
        #expect(gate.allowsSubscription(self.bob, topic: "diary.changed"))
        #expect(
            !gate.allowsCall(self.bob, namespace: "plugin", method: "register", privilege: .owner),
            "privileged needs an allow rule")
        #expect(gate.allowsCall(self.root, namespace: "plugin", method: "register", privilege: .owner))
        #expect(!gate.allowsPrivilegedSubscription(self.bob, topic: "streaks"), "a topic without reads is privileged")
        #expect(gate.unheld(.root, by: self.alice) == .root)
        #expect(gate.unheld(.root, by: self.root) == .unspecified)
        #expect(gate.unheld(.owner, by: PeerCredentials(pid: 3, uid: 1005, gid: 1005)) == .unspecified)
        #expect(gate.unheld(.unspecified, by: nil) == .unspecified)
    }

    @Test("a new policy bumps the generation, and routes pick out its rules on their next check")
    func gateGeneration() throws {
        var gate = AccessGate(policy: .default, daemonUID: nil)
        #expect(gate.generation == 1)
        let route = self.route("diary", "get", generation: 1)
        #expect(gate.allows(self.alice, through: route))
        let strict = try AccessPolicy(parsing: ["deny uid=1000 diary.get"])
        gate.replacePolicy(strict)
        #expect(gate.generation == 2)
        #expect(gate.policy == strict)
        #expect(!gate.allows(self.alice, through: route))
        #expect(gate.allows(self.bob, through: route))
        gate.replacePolicy(.default)
        #expect(gate.generation == 3)
        #expect(gate.allows(self.alice, through: route))
    }

    @Test("denials are logged at most once a second; the next line logged counts those left out")
    func gateSuppressesDenialLogs() {
        var gate = AccessGate(policy: .default, daemonUID: nil)
        let connection = ConnectionContext(id: ConnectionID(4), clientName: "ctl", credentials: self.alice)
        let start = ContinuousClock.now
        let first = gate.denialLog("diary.get", connection: connection, byRulesOf: "diary", at: start)
        #expect(first?["suppressed"] == "0")
        #expect(first?["action"] == "diary.get")
        #expect(first?["client"] == "ctl")
        #expect(first?["fix"]?.description.contains("allow uid=1000 diary.*") == true)
        #expect(first?["needs"] == nil)
        #expect(gate.denialLog("diary.get", connection: connection, at: start + .milliseconds(200)) == nil)
        #expect(gate.denialLog("diary.list", connection: connection, at: start + .milliseconds(900)) == nil)
        #expect(gate.suppressedDenials == 2)
        let next = gate.denialLog(
            "debug.crash", connection: connection, byRulesOf: "debug", privilege: .owner, at: start + .seconds(1))
        #expect(next?["suppressed"] == "2")
        #expect(next?["needs"]?.description.hasPrefix("root or the daemon's user") == true)
        #expect(next?["fix"] == nil, "no rule grants a privilege")
        #expect(gate.suppressedDenials == 0)
        #expect(gate.denialLog("diary.get", connection: connection, at: start + .milliseconds(1500)) == nil)
    }

    // MARK: Plugin host

    private func plugins() -> (PluginHost, advisor: HostedPlugin, kudos: HostedPlugin, MentoryEngine) {
        let engine = MentoryEngine(
            configuration: .init(serverVersion: "test"), executor: EngineTestLoops.group.next().executor
        )
        let since = Date(timeIntervalSince1970: 1_795_300_000)
        let advisor = HostedPlugin(.init(name: "advisor", namespace: "advisor"), since: since)
        let kudos = HostedPlugin(
            .init(name: "kudos", namespace: "kudos", requires: ["advisor"]), since: since)
        var host = PluginHost()
        host.declare(advisor)
        host.declare(kudos)
        return (host, advisor, kudos, engine)
    }

    @Test("the plugin host keeps declaration order and which connection serves which plugin")
    func pluginHostBookkeeping() throws {
        let (declared, advisor, kudos, engine) = self.plugins()
        var host = declared
        defer { withExtendedLifetime(engine) {} }
        let later = Date(timeIntervalSince1970: 1_795_300_060)
        #expect(host.declared.map(\.namespace) == ["advisor", "kudos"])
        #expect(host["kudos"] === kudos)
        #expect(host["diary"] == nil)
        #expect(host.statuses.map(\.state) == [.waiting, .waiting])

        try host.checkConnection(ConnectionID(1), mayRegisterAs: advisor)
        host.connect(advisor, on: ConnectionID(1), since: later)
        #expect(host.plugin(on: ConnectionID(1)) === advisor)
        #expect(advisor.isConnected)
        #expect(host.statuses.map(\.state) == [.connected, .waiting])
        #expect(host.statuses.first?.sinceUnixMs == 1_795_300_060_000)

        try host.checkConnection(ConnectionID(1), mayRegisterAs: advisor)  // registering again
        let twice = #expect(throws: MentoryError.self) {
            try host.checkConnection(ConnectionID(1), mayRegisterAs: kudos)
        }
        #expect(twice?.code == .invalidArgument)
        let taken = #expect(throws: MentoryError.self) {
            try host.checkConnection(ConnectionID(2), mayRegisterAs: advisor)
        }
        #expect(taken?.code == .conflict)

        #expect(host.disconnect(ConnectionID(2), since: later) == nil)
        #expect(host.disconnect(ConnectionID(1), since: later) === advisor)
        #expect(host.plugin(on: ConnectionID(1)) == nil)
        #expect(!advisor.isConnected)
        try host.checkConnection(ConnectionID(2), mayRegisterAs: advisor)

        // A refused registration leaves the plugin failed, served by no connection: closing it changes nothing.
        kudos.state = .failed(reason: "bad schema", since: later, connection: ConnectionID(3))
        #expect(host.disconnect(ConnectionID(3), since: later) == nil)
        #expect(host.statuses.last?.state == .failed)
        #expect(host.statuses.last?.reason == "bad schema")
    }

    @Test("a plugin is unavailable while it or a plugin it requires is not connected")
    func pluginHostAvailability() {
        let (declared, advisor, kudos, engine) = self.plugins()
        var host = declared
        defer { withExtendedLifetime(engine) {} }
        let since = Date(timeIntervalSince1970: 1_795_300_000)
        #expect(host.unavailability(of: kudos)?.message.contains("its plugin 'kudos' is not connected") == true)
        host.connect(kudos, on: ConnectionID(2), since: since)
        let missing = host.unavailability(of: kudos)
        #expect(missing?.code == .unavailable)
        #expect(missing?.message.contains("it requires 'advisor', whose plugin 'advisor' is not connected") == true)
        host.connect(advisor, on: ConnectionID(1), since: since)
        #expect(host.unavailability(of: kudos) == nil)
        #expect(host.unavailability(of: advisor) == nil)
        advisor.state = .failed(reason: "bad schema", since: since, connection: ConnectionID(1))
        #expect(host.unavailability(of: advisor)?.message.contains("failed to register: bad schema") == true)
    }

    @Test("registration writes run one after another, in the order they were asked for, by one writer")
    func pluginHostOrdersSaves() {
        final class Writes: Sendable {
            let order = NIOLockedValueBox<[Int]>([])
        }
        var host = PluginHost()
        let writes = Writes()
        var startsWriter: [Bool] = []
        for index in 1...5 {
            startsWriter.append(host.queueRegistrationSave { writes.order.withLockedValue { $0.append(index) } })
        }
        // The first write starts the one writing job; the rest queue behind it.
        #expect(startsWriter == [true, false, false, false, false])
        #expect(host.isSavingRegistrations)
        while let save = host.nextRegistrationSave() { save() }
        #expect(writes.order.withLockedValue { $0 } == [1, 2, 3, 4, 5])
        #expect(!host.isSavingRegistrations)
        // The queue emptied ended the writer's turn: the next write starts another.
        #expect(host.queueRegistrationSave {})
        #expect(host.abandonRegistrationSaves() == 1)
        #expect(!host.isSavingRegistrations)
    }

    // MARK: Route table

    @Test("the route table keeps routes of the current generation and forgets them all on a change")
    func routeTable() {
        var table = RouteTable()
        #expect(table.generation == 1)
        let get = self.route("diary", "get", generation: table.generation)
        table.insert(get)
        table.insert(self.route("diary", "list", generation: table.generation))
        #expect(table.route("diary", "get") === get)
        #expect(table.route("diary", "put") == nil)
        #expect(get.generation == table.generation)
        table.invalidate()
        #expect(table.generation == 2)
        #expect(table.route("diary", "get") == nil)
        #expect(table.route("diary", "list") == nil)
        #expect(get.generation != table.generation, "a route kept from before is of an older generation")
    }
}

extension SubscriptionHub {
    /// Publishes a change whose body is `text`'s bytes, as a handler's serialized change is published.
    fileprivate mutating func publish(text: String, on topic: String, epoch: UInt64)
        -> (event: SharedEvent, subscribers: [ConnectionID: Subscriptions.Subscriber]?)?
    {
        var body = ProtobufBuffer(Data(text.utf8))
        return self.publish(&body, on: topic, epoch: epoch)
    }
}
