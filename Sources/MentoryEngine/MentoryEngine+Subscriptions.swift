import MentoryHandlerKit
import MentoryWire

extension MentoryEngine {
    /// Every topic some handler publishes on, sorted.
    public var topicNames: [String] { self.hub.topicNames }

    /// Each topic with the sequence number of its newest event.
    public var topicPositions: [Mentory_V1_TopicPosition] {
        self.hub.positions(of: self.hub.topicNames)
    }

    var uptimeSeconds: Double {
        let elapsed = ContinuousClock.now - self.startedAt
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Subscribes a connection to topics.
    ///
    /// Topics are taken in the request's order. A topic without `resumeAfter` starts with a
    /// snapshot event. With `resumeAfter` in the current epoch and still in the ring, the missed
    /// events are replayed (none when it is the newest sequence); otherwise a reset event carries
    /// the current state. Live events follow in every case. All of this is queued on the
    /// connection before the reply is returned, so the reply follows the snapshots, unless the
    /// connection's queue is full, in which case a reset follows later. A topic of a declared plugin
    /// that is not registered now is held: nothing is sent until the plugin registers, and then a
    /// reset carries its state.
    ///
    /// The reply lists, per requested topic, the newest sequence number once everything above was
    /// queued, and the epoch. Taking a snapshot may suspend; should the connection detach
    /// meanwhile, nothing more is subscribed and nothing of it is kept.
    public func subscribe(
        _ id: ConnectionID,
        to request: Mentory_V1_SubscribeRequest
    ) async throws(MentoryError) -> Mentory_V1_SubscribeReply {
        guard !request.topics.isEmpty else {
            throw .invalidArgument("name at least one topic to subscribe to")
        }
        for subscription in request.topics where self.hub.owner(of: subscription.topic) == nil {
            throw .invalidArgument(
                "unknown topic '\(subscription.topic)'; topics are: \(self.topicNames.joined(separator: ", "))"
            )
        }
        guard let connection = self.connections[id] else { throw .handshakeRequired }
        let sink = connection.sink
        for subscription in request.topics
        where !self.gate.allowsSubscription(connection.context.credentials, topic: subscription.topic) {
            self.logDenial("subscribe:\(subscription.topic)", connection: connection.context)
            throw .permissionDenied(namespace: WireNames.session, method: "subscribe(\(subscription.topic))")
        }
        if let uid = connection.context.credentials?.uid {
            try self.hub.checkBudget(
                of: uid, adding: request.topics.map(\.topic), on: id,
                heldOn: self.connections.lazy.filter { $0.value.context.credentials?.uid == uid }.map(\.key))
        }
        for subscription in request.topics {
            // Re-checked for every topic: the previous one's snapshot may have suspended while
            // the connection detached, and a detached connection must not be subscribed again.
            guard self.connections[id] != nil else { throw .handshakeRequired }
            let topic = subscription.topic
            if self.absentPlugin(publishing: topic) != nil {
                // Held until the plugin registers; its registration resets every subscriber of its topics.
                _ = self.hub.subscribe(id, to: topic, delivery: .held, sink: sink)
                continue
            }
            if self.hub.canResume(subscription, epoch: self.epoch) {
                _ = self.hub.subscribe(id, to: topic, delivery: .live, sink: sink)
                self.replay(topic, after: subscription.resumeAfter, to: id)
            } else {
                let generation = self.hub.subscribe(id, to: topic, delivery: .resetting, sink: sink)
                do throws(MentoryError) {
                    try await self.sendState(
                        of: topic, to: id, kind: subscription.hasResumeAfter ? .reset : .snapshot,
                        generation: generation)
                } catch {
                    if self.hub.entry(id, topic)?.generation == generation {
                        if error.code == .unavailable, self.absentPlugin(publishing: topic) != nil {
                            // Its plugin went away while the snapshot was asked for: held like any other.
                            self.hub.setDelivery(.held, id, topic)
                            continue
                        }
                        self.hub.unsubscribe(id, from: topic)
                    }
                    throw error
                }
            }
        }
        guard self.connections[id] != nil else { throw .handshakeRequired }
        var reply = Mentory_V1_SubscribeReply()
        reply.topics = self.hub.positions(of: request.topics.lazy.map(\.topic))
        reply.epoch = self.epoch
        return reply
    }

    /// The plugin that publishes `topic`, when it is not registered now; `nil` for a topic of a
    /// built-in handler or of a registered plugin.
    func absentPlugin(publishing topic: String) -> PluginHostedHandler? {
        guard let owner = self.hub.owner(of: topic), let plugin = self.plugins[owner],
            !plugin.isConnected
        else { return nil }
        return plugin
    }

    /// Ends a connection's subscriptions to `topics`; an empty list ends them all.
    ///
    /// A snapshot or reset still being taken for an ended subscription is dropped when it completes.
    public func unsubscribe(_ id: ConnectionID, from topics: [String]) {
        if topics.isEmpty {
            self.hub.unsubscribeAll(id)
            return
        }
        for topic in topics {
            self.hub.unsubscribe(id, from: topic)
        }
    }
}
