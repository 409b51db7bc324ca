#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire
import SwiftProtobuf

/// What the engine serves: the engine's own namespaces, every handler and plugin namespace in registration
/// order, the routes resolved to them, the descriptors `session.describe` sends, and the settings handlers
/// see. Isolated to the engine, which holds one; a registration changes it, a request reads it.
struct HandlerRegistry {
    /// The namespaces the engine serves itself, `session` and `plugin`, made on the first route resolved.
    var engineNamespaces: [EngineNamespace] = []
    /// Every namespace a handler or a plugin serves, by name.
    var handlers: [String: any HostedHandler] = [:]
    /// Every namespace in ``handlers``, in the order it was registered or declared.
    var registrationOrder: [String] = []
    /// The descriptors `session.describe` sends, merged on first use after a registration changed them
    /// (decoding them costs; start-up should not pay for a describe nobody asked for).
    var describedDescriptorsCache: Google_Protobuf_FileDescriptorSet?
    /// The methods resolved so far (see ``MethodRoute``) and their generation, bumped by
    /// ``MentoryEngine/invalidateRoutes()``.
    var routes = RouteTable()
    /// The daemon-wide settings handlers see now; a reload may replace them.
    var handlerSettings: GlobalSettings
    /// Set once the handlers are closed: requests after it get ``MentoryError/shuttingDown``.
    var isShuttingDown = false

    init(handlerSettings: GlobalSettings) {
        self.handlerSettings = handlerSettings
    }
}

/// Who watches the engine from outside: the connections that asked for `session.monitor`, and what runs before
/// each metrics snapshot. Isolated to the engine, which holds one.
struct EngineObservers {
    /// Connections that asked for `session.monitor`.
    var monitors: [ConnectionID: Monitor] = [:]
    /// Run on the engine's executor before each metrics snapshot, to set gauges others keep the values of
    /// (the server's per-uid budgets).
    var metricsRefreshers: [@Sendable (isolated MentoryEngine) -> Void] = []
}
