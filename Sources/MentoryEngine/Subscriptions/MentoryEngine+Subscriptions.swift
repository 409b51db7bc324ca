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
        for subscription in request.topics {
            if let refusal = self.topicRefusal(subscription.topic, for: connection.context.credentials) {
                self.logDenial("subscribe:\(subscription.topic)", connection: connection.context)
                throw .permissionDenied(
                    namespace: WireNames.session, method: "subscribe(\(subscription.topic)): \(refusal)")
            }
        }
        let uid = connection.context.credentials?.uid
        if let uid {
            try self.hub.checkBudget(of: uid, adding: request.topics.map(\.topic), on: id)
        }
        for subscription in request.topics {
            // Re-checked for every topic: the previous one's snapshot may have suspended while
            // the connection detached, and a detached connection must not be subscribed again.
            guard self.connections[id] != nil else { throw .handshakeRequired }
            let topic = subscription.topic
            if self.absentPlugin(publishing: topic) != nil {
                // Held until the plugin registers; its registration resets every subscriber of its topics.
                _ = self.hub.subscribe(id, uid: uid, to: topic, delivery: .held, sink: sink)
                continue
            }
            if self.hub.canResume(subscription, epoch: self.epoch) {
                _ = self.hub.subscribe(id, uid: uid, to: topic, delivery: .live, sink: sink)
                self.replay(topic, after: subscription.resumeAfter, to: id)
            } else {
                let generation = self.hub.subscribe(id, uid: uid, to: topic, delivery: .resetting, sink: sink)
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

    // MARK: Who may read a topic

    /// Why a subscriber with `credentials` may not be sent `topic`'s events, or `nil` when it may.
    ///
    /// The topic's events carry what its `reads` return (``TopicInfo/reads``), so the subscriber must be
    /// allowed to call each of them, privilege and rules alike, as if it called them itself; and the
    /// `subscribe:` rules must allow the topic. A topic that declares no `reads` is privileged: root, the
    /// daemon's user, and a uid or group a rule allows `subscribe:TOPIC` by name. Checked at subscribe,
    /// before every snapshot and reset, and for every live subscriber after the policy changes.
    func topicRefusal(_ topic: String, for credentials: PeerCredentials?) -> String? {
        guard let owner = self.hub.owner(of: topic),
            let info = self.namespaceInfo(owner)?.topics.first(where: { $0.name == topic })
        else { return "no namespace declares it" }
        guard self.gate.allowsSubscription(credentials, topic: topic) else {
            return "access.rules deny subscribe:\(topic)"
        }
        guard !info.reads.isEmpty else {
            return self.gate.allowsPrivilegedSubscription(credentials, topic: topic)
                ? nil
                : "it declares no reads, so it is for root, the daemon's user and uids or groups access.rules"
                    + " allow subscribe:\(topic) by name"
        }
        for read in info.reads where !self.allowsRead(read, credentials) {
            return "its events carry what \(read) returns, which you may not call"
        }
        return nil
    }

    /// Whether a caller with `credentials` may call `read` (`namespace.method`), as a request would be
    /// checked; a method nobody declares is refused.
    private func allowsRead(_ read: String, _ credentials: PeerCredentials?) -> Bool {
        guard let dot = read.firstIndex(of: ".") else { return false }
        let namespace = String(read[..<dot])
        let method = String(read[read.index(after: dot)...])
        if let route = self.resolveRoute(namespace, method) {
            return self.gate.allows(credentials, through: route)
        }
        guard let declared = self.namespaceInfo(namespace)?.method(named: method) else { return false }
        return self.gate.allowsCall(credentials, namespace: namespace, method: method, privilege: declared.privilege)
    }

    /// Ends every subscription whose subscriber may no longer be sent its topic's events (after the access
    /// policy or a topic's declaration changed): each gets an ENDED event saying why, and nothing more.
    func endRefusedSubscriptions() {
        for (id, connection) in self.connections {
            for topic in self.hub.topics(of: id).sorted() {
                guard let refusal = self.topicRefusal(topic, for: connection.context.credentials) else { continue }
                self.endSubscription(id, to: topic, sink: connection.sink, refusal: refusal)
                self.logDenial("subscribe:\(topic) (a live subscription, ended)", connection: connection.context)
            }
        }
    }

    /// Ends `id`'s subscription to `topic`, which the access rules no longer let it read (`refusal`), with
    /// PERMISSION_DENIED.
    func endSubscription(_ id: ConnectionID, to topic: String, sink: any EventSink, refusal: String) {
        self.endSubscription(
            id, to: topic, sink: sink,
            error: .permissionDenied(namespace: WireNames.session, method: "subscribe(\(topic)): \(refusal)"))
    }

    /// Ends `id`'s subscription to `topic`, telling it why (`error`) with an ENDED event (not sent when its queue
    /// is full; the subscription ends either way).
    func endSubscription(_ id: ConnectionID, to topic: String, sink: any EventSink, error: MentoryError) {
        self.hub.unsubscribe(id, from: topic)
        var event = Mentory_V1_Event()
        event.topic = topic
        event.kind = .ended
        event.sequence = self.lastSequence(of: topic)
        event.epoch = self.epoch
        event.error = error.wireError
        _ = sink.deliver(SharedEvent(event))
    }

    /// The plugin that publishes `topic`, when it is not registered now; `nil` for a topic of a
    /// built-in handler or of a registered plugin.
    func absentPlugin(publishing topic: String) -> HostedPlugin? {
        guard let owner = self.hub.owner(of: topic), let plugin = self.registry.plugins[owner],
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
