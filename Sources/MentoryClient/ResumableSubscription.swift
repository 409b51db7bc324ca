import MentoryWire

/// Where a subscriber stands on one topic: the epoch and the sequence number of the last event it processed.
public struct TopicCursor: Sendable, Hashable {
    public var epoch: UInt64
    public var sequence: UInt64

    public init(epoch: UInt64, sequence: UInt64) {
        self.epoch = epoch
        self.sequence = sequence
    }
}

/// What a resumable subscription yields.
public enum SubscriptionUpdate: Sendable {
    /// An event, in order; snapshots and resets carry a topic's whole state.
    case event(Mentory_V1_Event)
    /// The subscription is (re)established on a connection to a daemon in `epoch`.
    case connected(epoch: UInt64)
    /// The connection was lost; the subscription is reconnecting.
    case disconnected(reason: String)
    /// The consumer left more than `limit` events unread, so the connection's event buffer
    /// overflowed. Every event before this marker was delivered; the subscription resubscribes at
    /// once from the last one, and the daemon replays what followed or sends a `RESET`.
    case overflowed(limit: Int)
}

/// A subscription that survives disconnects and daemon restarts; see
/// `MentoryClient.resumableSubscription`.
///
/// It reads from the daemon only as fast as it is iterated: it has no buffer of its own, and the
/// one connection it holds at a time buffers at most `eventBufferLimit` events. The connection is
/// closed when iteration ends, is cancelled, or the iterator is dropped.
public struct ResumableSubscription: AsyncSequence, Sendable {
    public typealias Element = SubscriptionUpdate

    let socketPath: String
    let clientName: String
    let topics: [String]
    let cursors: [String: TopicCursor]
    let reconnect: ReconnectPolicy
    let eventBufferLimit: Int
    let callTimeout: Duration
    let trust: SocketTrust

    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: self)
    }

    /// Iterates the updates; not to be shared between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = SubscriptionUpdate

        private let state: State

        init(subscription: ResumableSubscription) {
            self.state = State(subscription: subscription)
        }

        /// The next update; `nil` once the consuming task is cancelled. Throws when the daemon refuses the
        /// subscription itself (e.g. an unknown topic) or the socket is not trusted.
        public mutating func next() async throws -> SubscriptionUpdate? {
            try await self.state.next()
        }

        /// The connection currently in use, for tests.
        var currentClient: MentoryClient? { self.state.currentClient }
    }

    /// The iterator's state; closes its connection when the iterator goes away.
    final class State {
        private enum Phase {
            /// Connect next, first waiting the back-off for `attempt` if `wait`.
            case connecting(attempt: Int, wait: Bool)
            case streaming(MentoryClient, AsyncStream<Mentory_V1_Event>.Iterator)
            case finished
        }

        private let subscription: ResumableSubscription
        private var cursors: [String: TopicCursor]
        private var phase = Phase.connecting(attempt: 0, wait: false)
        /// The attempt number of the back-off to use after the next failure.
        private var failures = 0

        init(subscription: ResumableSubscription) {
            self.subscription = subscription
            self.cursors = subscription.cursors
        }

        deinit {
            if case .streaming(let client, _) = self.phase {
                client.closeSoon()
            }
        }

        var currentClient: MentoryClient? {
            if case .streaming(let client, _) = self.phase { return client }
            return nil
        }

        func next() async throws -> SubscriptionUpdate? {
            while true {
                if Task.isCancelled {
                    await self.finish()
                    return nil
                }
                switch self.phase {
                case .finished:
                    return nil
                case .streaming(let client, var events):
                    let event = await events.next()
                    self.phase = .streaming(client, events)
                    if let event {
                        self.cursors[event.topic] = TopicCursor(epoch: event.epoch, sequence: event.sequence)
                        return .event(event)
                    }
                    await client.close()
                    if Task.isCancelled {
                        self.phase = .finished
                        return nil
                    }
                    if client.eventBufferOverflowed {
                        // The daemon is fine; only this consumer fell behind. Resume at once.
                        self.phase = .connecting(attempt: 0, wait: false)
                        return .overflowed(limit: self.subscription.eventBufferLimit)
                    }
                    self.phase = .connecting(attempt: 0, wait: true)
                    return .disconnected(reason: "the daemon closed the connection")
                case .connecting(let attempt, let wait):
                    if wait {
                        do {
                            try await Task.sleep(for: self.subscription.reconnect.delay(forAttempt: attempt))
                        } catch {
                            self.phase = .finished
                            return nil
                        }
                    }
                    return try await self.connect(attempt: attempt, waited: wait)
                }
            }
        }

        private func connect(attempt: Int, waited wait: Bool) async throws -> SubscriptionUpdate? {
            let subscription = self.subscription
            let client: MentoryClient
            do {
                client = try await MentoryClient.connect(
                    socketPath: subscription.socketPath,
                    clientName: subscription.clientName,
                    defaultTimeout: subscription.callTimeout,
                    eventBufferLimit: subscription.eventBufferLimit,
                    trust: subscription.trust
                )
            } catch .untrustedSocket(let path, let reason) {
                self.phase = .finished
                throw MentoryClientError.untrustedSocket(path: path, reason: reason)
            } catch {
                self.phase = .connecting(attempt: wait ? attempt + 1 : attempt, wait: true)
                return .disconnected(reason: "\(error)")
            }
            let topics = subscription.topics.map { topic in
                var topicSubscription = Mentory_V1_TopicSubscription()
                topicSubscription.topic = topic
                if let cursor = self.cursors[topic] {
                    topicSubscription.resumeAfter = cursor.sequence
                    topicSubscription.epoch = cursor.epoch
                }
                return topicSubscription
            }
            do {
                _ = try await client.subscribe(topics)
            } catch {
                // Whatever went wrong, this connection is done with: never leave it open.
                await client.close()
                // A daemon shutting down, or a namespace that cannot serve now, is waited for like a
                // lost connection; any other refusal (an unknown topic, no permission) is for good.
                if let code = error.remoteCode, code != .shuttingDown, code != .unavailable {
                    self.phase = .finished
                    throw error
                }
                if Task.isCancelled {
                    self.phase = .finished
                    return nil
                }
                self.phase = .connecting(attempt: wait ? attempt + 1 : attempt, wait: true)
                return .disconnected(reason: "\(error)")
            }
            // Events that arrived before the reply wait in `client.events`.
            self.phase = .streaming(client, client.events.makeAsyncIterator())
            return .connected(epoch: client.welcome.epoch)
        }

        private func finish() async {
            if case .streaming(let client, _) = self.phase {
                await client.close()
            }
            self.phase = .finished
        }
    }
}

extension MentoryClient {
    /// Subscribes to `topics` and keeps the subscription alive across disconnects and daemon restarts.
    ///
    /// After every reconnect it resubscribes from the last event it yielded, so the daemon either
    /// replays what was missed or sends a reset with the current state: a consumer sees each
    /// change once, in order, or a reset covering the gap. A consumer that falls more than
    /// `eventBufferLimit` events behind gets ``SubscriptionUpdate/overflowed(limit:)`` and the
    /// same resumption, so memory stays bounded and nothing is lost silently. Reconnects wait
    /// according to `reconnect`; `callTimeout` bounds the handshake and the subscribe call.
    ///
    /// Ends only when the consuming task is cancelled or stops iterating, or with an error when
    /// the daemon refuses the subscription itself (for example an unknown topic) or the socket
    /// fails `trust` (``MentoryClientError/untrustedSocket(path:reason:)``).
    public static func resumableSubscription(
        socketPath: String,
        clientName: String,
        topics: [String],
        from cursors: [String: TopicCursor] = [:],
        reconnect: ReconnectPolicy = ReconnectPolicy(),
        eventBufferLimit: Int = MentoryClient.defaultEventBufferLimit,
        callTimeout: Duration = .seconds(30),
        trust: SocketTrust = .standard()
    ) -> ResumableSubscription {
        ResumableSubscription(
            socketPath: socketPath,
            clientName: clientName,
            topics: topics,
            cursors: cursors,
            reconnect: reconnect,
            eventBufferLimit: max(1, eventBufferLimit),
            callTimeout: callTimeout,
            trust: trust
        )
    }
}
