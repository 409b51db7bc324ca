import MentoryHandlerKit
// respond(to:from:), which the harness shares with these tests.
import MentoryHandlerTesting
import MentoryWire

@testable import MentoryEngine

/// What the engine tests ask of the engine and the daemon never does: kept here, out of the production code (a
/// request answered and awaited is `respond(to:from:)`, from MentoryHandlerTesting).
extension MentoryEngine {
    /// The topics connection `id` is subscribed to, sorted.
    func subscribedTopics(of id: ConnectionID) -> [String] {
        self.hub.topics(of: id).sorted()
    }

    /// The connections subscribed to `topic`.
    func subscriberIDs(of topic: String) -> Set<ConnectionID> {
        self.hub.subscribers(of: topic)
    }

    /// Whether the subscription indexes agree with each other and name only attached connections.
    var subscriptionsAreConsistent: Bool {
        self.hub.checkInvariants(attached: Set(self.connections.keys))
    }

    /// Whether `namespace` is kept in one place only: a plugin in the registry's ``PluginHost``, a handler (the
    /// engine's own `session` and `plugin` among them, once a route was resolved) in its hosted handlers.
    func isHostedOnce(_ namespace: String) -> Bool {
        (self.registry.handlers[namespace] != nil) != (self.registry.plugins[namespace] != nil)
    }
}
