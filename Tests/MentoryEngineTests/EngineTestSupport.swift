import MentoryHandlerKit
import MentoryWire

@testable import MentoryEngine

/// What the engine tests ask of the engine and the daemon never does: kept here, out of the production code.
extension MentoryEngine {
    /// Answers `request` through ``respond(to:from:received:queued:)``, waiting for a suspended one; the bodies
    /// are copied.
    func respond(to request: Mentory_V1_Request, from id: ConnectionID) async -> Mentory_V1_Response {
        switch self.respond(to: InboundRequest(request), from: id, received: .now) {
        case .answered(let response): return response.wireResponse
        case .suspended(let task, _): return await task.value.wireResponse
        }
    }

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
