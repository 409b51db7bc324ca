import MentoryWire

extension MentoryEngine {
    /// Every topic some handler publishes on, sorted.
    public var topicNames: [String] { self.topicOwners.keys.sorted() }

    /// Each topic with the sequence number of its newest event.
    public var topicPositions: [Mentory_V1_TopicPosition] {
        self.topicNames.map { topic in
            var position = Mentory_V1_TopicPosition()
            position.topic = topic
            position.sequence = self.lastSequence(of: topic)
            return position
        }
    }

    var uptimeSeconds: Double {
        let elapsed = ContinuousClock.now - self.startedAt
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Subscribes a connection to topics.
    ///
    /// A topic without `resumeAfter` starts with a snapshot event. With `resumeAfter` in the
    /// current epoch and still in the ring, the missed events are replayed; otherwise a reset
    /// event carries the current state. Live events follow in both cases.
    public func subscribe(
        _ id: ConnectionID,
        to request: Mentory_V1_SubscribeRequest
    ) async throws(MentoryError) -> Mentory_V1_SubscribeReply {
        guard !request.topics.isEmpty else {
            throw .invalidArgument("name at least one topic to subscribe to")
        }
        for subscription in request.topics where self.topicOwners[subscription.topic] == nil {
            throw .invalidArgument(
                "unknown topic '\(subscription.topic)'; topics are: \(self.topicNames.joined(separator: ", "))"
            )
        }
        guard let connection = self.connections[id] else { throw .handshakeRequired }
        for subscription in request.topics
        where !self.accessPolicy.allowsSubscription(connection.context.credentials, topic: subscription.topic) {
            self.logDenial("subscribe:\(subscription.topic)", connection: connection.context)
            throw .permissionDenied(namespace: WireNames.session, method: "subscribe(\(subscription.topic))")
        }
        for subscription in request.topics {
            let topic = subscription.topic
            self.connections[id]?.topics[topic] = false
            self.subscribers[topic, default: []].insert(id)
            let canResume =
                subscription.hasResumeAfter && subscription.epoch == self.epoch
                && self.logs[topic]?.events(after: subscription.resumeAfter) != nil
            if canResume {
                self.connections[id]?.topics[topic] = true
                self.replay(topic, after: subscription.resumeAfter, to: id)
            } else {
                await self.sendState(of: topic, to: id, kind: subscription.hasResumeAfter ? .reset : .snapshot)
            }
        }
        var reply = Mentory_V1_SubscribeReply()
        reply.topics = request.topics.map { subscription in
            var position = Mentory_V1_TopicPosition()
            position.topic = subscription.topic
            position.sequence = self.lastSequence(of: subscription.topic)
            return position
        }
        reply.epoch = self.epoch
        return reply
    }

    /// Ends a connection's subscriptions to `topics`; an empty list ends them all.
    public func unsubscribe(_ id: ConnectionID, from topics: [String]) {
        guard let connection = self.connections[id] else { return }
        let ending = topics.isEmpty ? Array(connection.topics.keys) : topics
        for topic in ending {
            self.connections[id]?.topics[topic] = nil
            self.subscribers[topic]?.remove(id)
        }
    }
}
