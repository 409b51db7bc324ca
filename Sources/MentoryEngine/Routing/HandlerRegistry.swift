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
///
/// Route resolution asks it one question, ``answer(_:_:)``, whoever serves the namespace: a handler hosted
/// in-process (the engine's own `session` and `plugin` among them, hosted on the first route resolved) or a plugin,
/// kept once, in ``plugins``.
struct HandlerRegistry {
    /// Every namespace hosted in-process, by name: the built-in and registered handlers, and the engine's own.
    var handlers: [String: any HostedHandler] = [:]
    /// The declared plugins and the connections that serve them.
    var plugins = PluginHost()
    /// Every namespace a handler or a plugin serves (not the engine's own), in the order it was registered or
    /// declared.
    var registrationOrder: [String] = []
    /// The namespaces whose methods act on the connection calling them (`session`, `plugin`): their routes are
    /// not ``MethodRoute/callableOnBehalf``.
    static let connectionBound: Set<String> = [WireNames.session, WireNames.plugin]
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

    /// Whether a handler or plugin serves `namespace`, so that a handler may call it on a caller's behalf.
    func isCallableOnBehalf(_ namespace: String) -> Bool {
        !Self.connectionBound.contains(namespace) && (self.handlers[namespace] != nil || self.plugins[namespace] != nil)
    }

    /// What answers `namespace.method`, with the namespace's declaration and whether the method queues snapshot
    /// events before it answers; `nil` for a method nobody serves (or a plugin has not registered).
    func answer(
        _ namespace: String, _ method: String
    ) -> (info: NamespaceInfo, answer: MethodRoute.Answer, queuesSnapshots: Bool)? {
        if let handler = self.handlers[namespace] {
            switch handler.resolve(method: method) {
            case .immediate(let respond):
                return (handler.info, .immediate(respond), false)
            case .suspending(let attempt):
                let queuesSnapshots = (handler as? EngineHostedNamespace)?.snapshotMethods.contains(method) ?? false
                let respond: MethodRoute.Suspending = { engine, body, call in
                    guard let handler = engine.registry.handlers[namespace] else {
                        throw engine.routeFailure(namespace, call.method)
                    }
                    return try await handler.respond(method: call.method, body: body, call: call)
                }
                guard let attempt else { return (handler.info, .suspending(respond), queuesSnapshots) }
                return (handler.info, .attempted(attempt, otherwise: respond), queuesSnapshots)
            case nil:
                return nil
            }
        }
        guard let plugin = self.plugins[namespace], plugin.info.method(named: method) != nil else { return nil }
        // The plugin protocol carries bodies as `Data` (`PluginCall.body`, `PluginReply.body`): the request
        // body is copied into one here and the plugin's reply out of one.
        let answer = MethodRoute.Answer.suspending { engine, body, call in
            ProtobufBuffer(
                try await engine.forwardToPlugin(
                    namespace, method: call.method, snapshotTopic: "", body: Data(body.readableBytesView), call: call))
        }
        return (plugin.info, answer, false)
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
