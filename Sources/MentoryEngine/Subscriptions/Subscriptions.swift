import MentoryHandlerKit

/// Which connection is subscribed to which topic, and how far each subscription's delivery got.
///
/// One value holds both directions of the relation, so they cannot disagree: every mutation
/// updates both. Invariants (checked by ``checkInvariants()`` in tests):
/// - a connection is listed under a topic exactly when the connection holds an entry for it, with the
///   same delivery;
/// - no connection or topic is kept with an empty set of entries.
///
/// Held by the engine's ``SubscriptionHub``. The engine adds entries only for attached connections and
/// removes all of a connection's entries when it detaches, so no id outlives its connection.
struct Subscriptions {
    /// How events reach one subscriber of one topic.
    enum Delivery: Equatable {
        /// Changes are delivered as they are published.
        case live
        /// The subscriber's queue was full; nothing is sent until a reset starts.
        case overflowed
        /// A snapshot or reset is being taken; changes are held back until it is sent. At most one
        /// is in flight per subscription: the one whose ``Entry/generation`` matches.
        case resetting
        /// The topic's plugin is not registered: the subscription is kept, and nothing is sent until
        /// the plugin registers and a reset carries its state.
        case held
    }

    struct Entry: Equatable {
        var delivery: Delivery
        /// Identifies the snapshot or reset allowed to complete this subscription; a newer one
        /// (after unsubscribing and subscribing again) makes an older one stale.
        var generation: UInt64
    }

    /// A subscriber of a topic as a publish reads it: how its events reach it and where they go.
    struct Subscriber {
        var delivery: Delivery
        /// The subscriber's connection's sink, kept here so that a delivery looks up no connection.
        let sink: any EventSink
    }

    private var byConnection: [ConnectionID: [String: Entry]] = [:]
    /// The same entries' deliveries by topic, with each subscriber's sink, so that a publish reads its
    /// subscribers' states and sinks in one lookup.
    private var byTopic: [String: [ConnectionID: Subscriber]] = [:]
    private var nextGeneration: UInt64 = 0

    /// The subscription of `id` to `topic`, if any.
    func entry(_ id: ConnectionID, _ topic: String) -> Entry? {
        self.byConnection[id]?[topic]
    }

    /// How many topics `id` is subscribed to.
    func count(of id: ConnectionID) -> Int {
        self.byConnection[id]?.count ?? 0
    }

    /// The topics `id` is subscribed to.
    func topics(of id: ConnectionID) -> [String] {
        self.byConnection[id].map { Array($0.keys) } ?? []
    }

    /// The connections subscribed to `topic`.
    func subscribers(of topic: String) -> Set<ConnectionID> {
        self.byTopic[topic].map { Set($0.keys) } ?? []
    }

    /// How events reach each subscriber of `topic`.
    func deliveries(of topic: String) -> [ConnectionID: Subscriber]? {
        self.byTopic[topic]
    }

    /// The topics of `id` whose subscriber queue overflowed.
    func overflowed(of id: ConnectionID) -> [String] {
        guard let topics = self.byConnection[id] else { return [] }
        return topics.compactMap { $0.value.delivery == .overflowed ? $0.key : nil }.sorted()
    }

    /// How many connections hold at least one subscription.
    var connectionCount: Int { self.byConnection.count }

    /// Subscribes `id`, whose events go to `sink`, to `topic` (again, if it already was) with a fresh
    /// generation, and returns it.
    mutating func insert(_ id: ConnectionID, _ topic: String, delivery: Delivery, sink: any EventSink) -> UInt64 {
        self.nextGeneration += 1
        self.byConnection[id, default: [:]][topic] = Entry(delivery: delivery, generation: self.nextGeneration)
        self.byTopic[topic, default: [:]][id] = Subscriber(delivery: delivery, sink: sink)
        return self.nextGeneration
    }

    /// Changes how events reach `id` on `topic`; does nothing when it is not subscribed.
    mutating func setDelivery(_ delivery: Delivery, _ id: ConnectionID, _ topic: String) {
        guard self.byConnection[id]?[topic] != nil else { return }
        self.byConnection[id]![topic]!.delivery = delivery
        self.byTopic[topic]![id]!.delivery = delivery
    }

    /// Marks an overflowed subscription as resetting under a fresh generation, which it returns;
    /// `nil` when the subscription is absent or not overflowed (a reset is already in flight).
    mutating func beginReset(_ id: ConnectionID, _ topic: String) -> UInt64? {
        guard self.byConnection[id]?[topic]?.delivery == .overflowed else { return nil }
        self.nextGeneration += 1
        self.byConnection[id]![topic] = Entry(delivery: .resetting, generation: self.nextGeneration)
        self.byTopic[topic]![id]!.delivery = .resetting
        return self.nextGeneration
    }

    /// Ends the subscription of `id` to `topic`.
    mutating func remove(_ id: ConnectionID, _ topic: String) {
        guard self.byConnection[id]?.removeValue(forKey: topic) != nil else { return }
        if self.byConnection[id]!.isEmpty { self.byConnection[id] = nil }
        self.byTopic[topic]?.removeValue(forKey: id)
        if self.byTopic[topic]?.isEmpty == true { self.byTopic[topic] = nil }
    }

    /// Ends every subscription of `id`.
    mutating func removeAll(_ id: ConnectionID) {
        guard let topics = self.byConnection.removeValue(forKey: id) else { return }
        for topic in topics.keys {
            self.byTopic[topic]?.removeValue(forKey: id)
            if self.byTopic[topic]?.isEmpty == true { self.byTopic[topic] = nil }
        }
    }

    /// Whether both indexes agree and hold no empty sets; `connections` are the attached ones.
    func checkInvariants(attached connections: Set<ConnectionID>) -> Bool {
        for (id, topics) in self.byConnection {
            guard !topics.isEmpty, connections.contains(id) else { return false }
            for (topic, entry) in topics where self.byTopic[topic]?[id]?.delivery != entry.delivery { return false }
        }
        for (topic, deliveries) in self.byTopic {
            guard !deliveries.isEmpty else { return false }
            for (id, subscriber) in deliveries where self.byConnection[id]?[topic]?.delivery != subscriber.delivery {
                return false
            }
        }
        return true
    }
}
