#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire

/// The topics and who listens to them: which namespace publishes each topic, each topic's ring of recent
/// events (``EventLog``), and every connection's subscriptions (``Subscriptions``) with how far their
/// delivery got.
///
/// The engine holds one as a stored property and mutates it in place, on its own executor; the hub
/// decides nothing that needs a connection's sink or a handler's snapshot, which the engine does.
/// Invariants (checked by ``checkInvariants(attached:)`` in tests):
/// - every topic with a publisher has a ring; a topic its publisher gave up (``withdraw(_:)``) keeps
///   its ring, so that sequence numbers carry on where they were when it is published on again;
/// - the subscriptions' two indexes agree (``Subscriptions``);
/// - a subscription is added past ``maxSubscriptionsPerUID`` for no uid that
///   ``checkBudget(of:adding:on:)`` was asked about;
/// - each uid's count of subscriptions (``subscriptionCount(of:)``) is what its connections hold: kept as they
///   subscribe and unsubscribe, so that checking a uid's budget costs one look-up, not one per connection.
struct SubscriptionHub {
    /// How many recent events each topic's ring keeps (`events.ringCapacity`).
    let ringCapacity: Int
    /// How many bytes of recent events each topic's ring keeps at most (`events.ringBytes`).
    let ringBytes: Int
    /// Topic subscriptions one uid's connections may hold together (`limits.uidSubscriptions`).
    let maxSubscriptionsPerUID: Int

    /// The namespace publishing each topic, by topic.
    private var owners: [String: String] = [:]
    /// Each topic's recent events; also kept for a topic whose publisher gave it up.
    private var logs: [String: EventLog] = [:]
    private var subscriptions = Subscriptions()
    /// The uid of each connection holding a subscription, as it subscribed (none for a peer without credentials).
    private var uids: [ConnectionID: UInt32] = [:]
    /// The subscriptions each uid's connections hold together.
    private var countsByUID: [UInt32: Int] = [:]

    init(ringCapacity: Int, ringBytes: Int, maxSubscriptionsPerUID: Int) {
        self.ringCapacity = ringCapacity
        self.ringBytes = ringBytes
        self.maxSubscriptionsPerUID = maxSubscriptionsPerUID
    }

    // MARK: Topics

    /// The namespace that publishes `topic`, if any does.
    func owner(of topic: String) -> String? {
        self.owners[topic]
    }

    /// Every topic some namespace publishes on, sorted.
    var topicNames: [String] { self.owners.keys.sorted() }

    /// Makes `namespace` the publisher of `topic`, with an empty ring unless the topic has one already.
    mutating func declare(_ topic: String, publishedBy namespace: String) {
        self.owners[topic] = namespace
        if self.logs[topic] == nil {
            self.logs[topic] = EventLog(topic: topic, capacity: self.ringCapacity, byteCapacity: self.ringBytes)
        }
    }

    /// Forgets who publishes `topic`; its ring stays for a later publisher of the same topic.
    mutating func withdraw(_ topic: String) {
        self.owners[topic] = nil
    }

    // MARK: Events

    /// Publishes a change of `body` on `topic` in `epoch`: numbers and frames it in the topic's ring
    /// (``EventLog/append(change:epoch:)``; `body` is then a slice of the event's frame, when it could be framed
    /// where it is) and returns it with how it reaches each subscriber
    /// (``deliveries(of:)``); `nil` (keeping nothing) when the topic has no ring.
    ///
    /// One call for the publish, in place: the engine reading ``deliveries(of:)`` from its stored hub
    /// would copy the hub (a retain and release of each of its tables) for every publish.
    mutating func publish(_ body: inout ProtobufBuffer, on topic: String, epoch: UInt64)
        -> (event: SharedEvent, subscribers: [ConnectionID: Subscriptions.Subscriber]?)?
    {
        // One look-up of the topic's name, then the ring appended to in place through its index: the
        // dictionary's optional subscript would look it up again to write it back, and taking the ring out
        // of the dictionary would copy all of it (copy-on-write).
        guard let index = self.logs.index(forKey: topic) else { return nil }
        let event = self.logs.values[index].append(change: &body, epoch: epoch)
        return (event, self.subscriptions.deliveries(of: topic))
    }

    /// Each topic with a ring (a topic whose publisher went away keeps its ring) and how many changes were published
    /// on it in this run of the daemon: the sequence number of its newest event.
    var publishedCounts: [(topic: String, published: UInt64)] {
        self.logs.map { (topic: $0.key, published: $0.value.lastSequence) }
    }

    /// The sequence number of the newest event on `topic`; 0 before its first, or for an unknown topic.
    func lastSequence(of topic: String) -> UInt64 {
        self.logs[topic]?.lastSequence ?? 0
    }

    /// Each of `topics` with the sequence number of its newest event.
    func positions(of topics: some Sequence<String>) -> [Mentory_V1_TopicPosition] {
        topics.map { topic in
            var position = Mentory_V1_TopicPosition()
            position.topic = topic
            position.sequence = self.lastSequence(of: topic)
            return position
        }
    }

    /// The events on `topic` after `sequence`, oldest first; `nil` when some of them are no longer kept
    /// (or the topic has no ring), so that a subscriber resuming there needs a reset instead.
    func events(on topic: String, after sequence: UInt64) -> [SharedEvent]? {
        self.logs[topic]?.events(after: sequence)
    }

    /// Whether `subscription` can resume by replaying what it missed: it names a position, in `epoch`,
    /// that the topic's ring still covers.
    func canResume(_ subscription: Mentory_V1_TopicSubscription, epoch: UInt64) -> Bool {
        subscription.hasResumeAfter && subscription.epoch == epoch
            && self.events(on: subscription.topic, after: subscription.resumeAfter) != nil
    }

    // MARK: Subscriptions

    /// The subscription of `id` to `topic`, if any.
    func entry(_ id: ConnectionID, _ topic: String) -> Subscriptions.Entry? {
        self.subscriptions.entry(id, topic)
    }

    /// How many topics `id` is subscribed to.
    func count(of id: ConnectionID) -> Int {
        self.subscriptions.count(of: id)
    }

    /// The topics `id` is subscribed to, in no order.
    func topics(of id: ConnectionID) -> [String] {
        self.subscriptions.topics(of: id)
    }

    /// The connections subscribed to `topic`.
    func subscribers(of topic: String) -> Set<ConnectionID> {
        self.subscriptions.subscribers(of: topic)
    }

    /// How events reach each subscriber of `topic`, as a publish reads them.
    func deliveries(of topic: String) -> [ConnectionID: Subscriptions.Subscriber]? {
        self.subscriptions.deliveries(of: topic)
    }

    /// The topics of `id` whose subscriber queue overflowed, sorted.
    func overflowed(of id: ConnectionID) -> [String] {
        self.subscriptions.overflowed(of: id)
    }

    /// How many connections hold at least one subscription.
    var subscriberCount: Int { self.subscriptions.connectionCount }

    /// The subscriptions `uid`'s connections hold together.
    func subscriptionCount(of uid: UInt32) -> Int {
        self.countsByUID[uid] ?? 0
    }

    /// Throws UNAVAILABLE when subscribing `id` to `topics` would take `uid`'s connections past
    /// ``maxSubscriptionsPerUID`` subscriptions together. Topics `id` is subscribed to already count nothing more.
    func checkBudget(of uid: UInt32, adding topics: [String], on id: ConnectionID) throws(MentoryError) {
        let new = Set(topics).filter { self.subscriptions.entry(id, $0) == nil }.count
        guard new > 0 else { return }
        let held = self.subscriptionCount(of: uid)
        let limit = self.maxSubscriptionsPerUID
        guard held + new <= limit else {
            throw .unavailable(
                "uid \(uid) holds \(held) subscriptions and may hold \(limit) (limits.uidSubscriptions);"
                    + " unsubscribe or close some connections first")
        }
    }

    /// Subscribes `id`, whose events go to `sink`, to `topic` (again, if it already was) with a fresh
    /// generation, and returns that generation; a new subscription counts toward `uid`'s.
    mutating func subscribe(
        _ id: ConnectionID, uid: UInt32?, to topic: String, delivery: Subscriptions.Delivery, sink: any EventSink
    ) -> UInt64 {
        if let uid, self.subscriptions.entry(id, topic) == nil {
            self.uids[id] = uid
            self.countsByUID[uid, default: 0] += 1
        }
        return self.subscriptions.insert(id, topic, delivery: delivery, sink: sink)
    }

    /// Changes how events reach `id` on `topic`; does nothing when it is not subscribed.
    mutating func setDelivery(_ delivery: Subscriptions.Delivery, _ id: ConnectionID, _ topic: String) {
        self.subscriptions.setDelivery(delivery, id, topic)
    }

    /// Marks an overflowed subscription as resetting under a fresh generation, which it returns; `nil`
    /// when the subscription is absent or not overflowed (a reset is already in flight).
    mutating func beginReset(_ id: ConnectionID, _ topic: String) -> UInt64? {
        self.subscriptions.beginReset(id, topic)
    }

    /// Marks the subscription of `id` to `topic` as resetting under a fresh generation, which it returns,
    /// whatever it was delivering (its publisher registered again, so what it was sent may be stale);
    /// `nil` when it is absent or a reset is already in flight.
    mutating func beginForcedReset(_ id: ConnectionID, _ topic: String) -> UInt64? {
        let delivery = self.subscriptions.entry(id, topic)?.delivery
        if delivery == .live || delivery == .held {
            self.subscriptions.setDelivery(.overflowed, id, topic)
        }
        return self.subscriptions.beginReset(id, topic)
    }

    /// Holds every live or overflowed subscription to `topic` (its publisher went away): nothing is
    /// sent to them until a reset. A reset in flight is left to finish.
    mutating func holdSubscribers(of topic: String) {
        for id in self.subscriptions.subscribers(of: topic) {
            let delivery = self.subscriptions.entry(id, topic)?.delivery
            if delivery == .live || delivery == .overflowed {
                self.subscriptions.setDelivery(.held, id, topic)
            }
        }
    }

    /// Ends the subscription of `id` to `topic`.
    mutating func unsubscribe(_ id: ConnectionID, from topic: String) {
        guard self.subscriptions.entry(id, topic) != nil else { return }
        self.subscriptions.remove(id, topic)
        self.uncount(1, of: id)
    }

    /// Ends every subscription of `id`.
    mutating func unsubscribeAll(_ id: ConnectionID) {
        let held = self.subscriptions.count(of: id)
        self.subscriptions.removeAll(id)
        self.uncount(held, of: id)
    }

    /// Counts `ended` subscriptions of `id` out of its uid's; forgets its uid once it holds none.
    private mutating func uncount(_ ended: Int, of id: ConnectionID) {
        guard ended > 0, let uid = self.uids[id] else { return }
        let left = (self.countsByUID[uid] ?? 0) - ended
        self.countsByUID[uid] = left > 0 ? left : nil
        if self.subscriptions.count(of: id) == 0 { self.uids[id] = nil }
    }

    /// Whether every published topic has a ring and the subscription indexes agree, naming only
    /// `connections`, the attached ones.
    func checkInvariants(attached connections: Set<ConnectionID>) -> Bool {
        var counts: [UInt32: Int] = [:]
        for (id, uid) in self.uids { counts[uid, default: 0] += self.subscriptions.count(of: id) }
        return self.owners.keys.allSatisfy { self.logs[$0] != nil }
            && self.subscriptions.checkInvariants(attached: connections)
            && counts == self.countsByUID && self.uids.keys.allSatisfy { self.subscriptions.count(of: $0) > 0 }
    }
}
