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
}

extension MentoryClient {
    /// Subscribes to `topics` and keeps the subscription alive across disconnects and daemon restarts.
    ///
    /// After every reconnect it resubscribes from the last event it yielded, so the daemon either
    /// replays what was missed or sends a reset with the current state: a consumer sees each
    /// change once, in order, or a reset covering the gap. Ends only when the consuming task is
    /// cancelled or stops iterating, or with an error when the daemon refuses the subscription
    /// itself (for example an unknown topic).
    public static func resumableSubscription(
        socketPath: String,
        clientName: String,
        topics: [String],
        from cursors: [String: TopicCursor] = [:],
        reconnect: ReconnectPolicy = ReconnectPolicy()
    ) -> AsyncThrowingStream<SubscriptionUpdate, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: SubscriptionUpdate.self,
            throwing: (any Error).self,
            bufferingPolicy: .unbounded
        )
        let task = Task {
            var cursors = cursors
            var attempt = 0
            while !Task.isCancelled {
                do {
                    let client = try await MentoryClient.connect(socketPath: socketPath, clientName: clientName)
                    attempt = 0
                    let subscriptions = topics.map { topic in
                        var subscription = Mentory_V1_TopicSubscription()
                        subscription.topic = topic
                        if let cursor = cursors[topic] {
                            subscription.resumeAfter = cursor.sequence
                            subscription.epoch = cursor.epoch
                        }
                        return subscription
                    }
                    do {
                        _ = try await client.subscribe(subscriptions)
                    } catch let error as MentoryClientError where error.remoteCode != nil {
                        await client.close()
                        continuation.finish(throwing: error)
                        return
                    }
                    continuation.yield(.connected(epoch: client.welcome.epoch))
                    // Events that arrived before the reply are buffered in `client.events`.
                    for await event in client.events {
                        cursors[event.topic] = TopicCursor(epoch: event.epoch, sequence: event.sequence)
                        continuation.yield(.event(event))
                    }
                    await client.close()
                    if Task.isCancelled { break }
                    continuation.yield(.disconnected(reason: "the daemon closed the connection"))
                } catch {
                    continuation.yield(.disconnected(reason: "\(error)"))
                }
                try? await Task.sleep(for: reconnect.delay(forAttempt: attempt))
                attempt += 1
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
