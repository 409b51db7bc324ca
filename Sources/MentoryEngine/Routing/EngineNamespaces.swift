import Configuration
import MentoryHandlerKit
import MentoryWire
import NIOCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A namespace the engine serves itself, declared in mentory.proto like any other: `session` (every
/// client's) and `plugin` (plugin processes'). It is an ordinary hosted handler, kept in the engine's
/// ``HandlerRegistry`` beside the built-in ones and routed through the same branch; it differs only in acting on
/// engine state (subscriptions, registrations) rather than through a ``HandlerContext``, which is why its methods
/// act on the connection calling them and a handler cannot call them on a client's behalf
/// (``HandlerRegistry/connectionBound``).
final class EngineHostedNamespace: HostedHandler {
    /// What answers a method that may suspend: run in its caller's isolation (the engine's, from the gate).
    typealias Answer =
        nonisolated(nonsending) @Sendable (MentoryEngine, ByteBuffer, RequestContext) async throws
        -> ProtobufBuffer

    /// The namespace's declaration.
    let info: NamespaceInfo
    /// What answers each method without suspending, by name: each a ``ResolvedRoute/immediate(_:)``, an enum
    /// around its closure, so that the closure is kept as it was written (a closure kept as a dictionary's value
    /// is reached through a reabstraction thunk on every call).
    private let immediate: [String: ResolvedRoute]
    /// What answers each method that may suspend, by name; called only by the engine's gate, through
    /// ``respond(method:body:call:)``.
    private let suspending: [String: EngineHostedNamespace.Answer]
    /// The methods that queue snapshot events for their caller before they answer.
    let snapshotMethods: Set<String>
    /// The engine it is served by; unowned: the engine owns its hosted handlers.
    private unowned let engine: MentoryEngine

    init(
        _ info: NamespaceInfo, engine: MentoryEngine,
        immediate: [String: ResolvedRoute],
        suspending: [String: EngineHostedNamespace.Answer] = [:],
        snapshotMethods: Set<String> = []
    ) {
        self.info = info
        self.engine = engine
        self.immediate = immediate
        self.suspending = suspending
        self.snapshotMethods = snapshotMethods
    }

    /// The declarations of both, `session` first, as `session.describe` lists them.
    static let declared = [MentorySchema.Session.info, MentorySchema.Plugin.info]

    var namespace: String { self.info.name }
    var descriptors: SchemaDescriptors { MentorySchema.fileDescriptors }

    func resolve(method: String) -> ResolvedRoute? {
        if let route = self.immediate[method] { return route }
        return self.suspending[method] != nil ? .suspending(attempt: nil) : nil
    }

    nonisolated(nonsending) func respond(method: String, body: ByteBuffer, call: RequestContext) async throws
        -> ProtobufBuffer
    {
        if case .immediate(let answer)? = self.immediate[method] { return try answer(body, call) }
        guard let answer = self.suspending[method] else {
            throw MentoryError.unknownMethod(namespace: self.namespace, method: method)
        }
        return try await answer(self.engine, body, call)
    }

    nonisolated(nonsending) func snapshot(of topic: String) async throws -> Data {
        throw MentoryError.internal("namespace '\(self.namespace)' has no topic '\(topic)'")
    }

    func connectionClosed(_ connection: ConnectionID) {
        // The engine forgets a connection's subscriptions, monitor and plugin itself (MentoryEngine.detach).
    }

    func reload(config: ConfigReader, settings: GlobalSettings) throws {}

    nonisolated(nonsending) func close() async {}
}

extension MentoryEngine {
    /// Hosts both engine namespaces in the registry, once, before the first route is resolved. Made in the engine's
    /// isolation, so that their answers are isolated to it (they capture it unowned: the engine owns its handlers).
    func hostEngineNamespaces() {
        guard self.registry.handlers[WireNames.session] == nil else { return }
        for namespace in [self.sessionNamespace(), self.pluginNamespace()] {
            self.registry.handlers[namespace.namespace] = namespace
        }
    }

    /// `service Session`: what every client may call.
    private func sessionNamespace() -> EngineHostedNamespace {
        typealias Session = MentorySchema.Session
        return EngineHostedNamespace(
            Session.info, engine: self,
            immediate: [
                Session.ping.name: .immediate { body, _ in
                    _ = try Session.ping.decodeRequest(body)
                    return Mentory_V1_Empty().replyBody()
                },
                Session.status.name: .immediate { [unowned self] body, _ in
                    _ = try Session.status.decodeRequest(body)
                    return self.status().replyBody()
                },
                Session.unsubscribe.name: .immediate { [unowned self] body, call in
                    let request = try Session.unsubscribe.decodeRequest(body)
                    self.unsubscribe(call.connection.id, from: request.topics)
                    return Mentory_V1_Empty().replyBody()
                },
                Session.describe.name: .immediate { [unowned self] body, _ in
                    let request = try Session.describe.decodeRequest(body)
                    return try self.describe(request).replyBody()
                },
                Session.monitor.name: .immediate { [unowned self] body, call in
                    let request = try Session.monitor.decodeRequest(body)
                    try self.startMonitor(call.connection.id, request)
                    return Mentory_V1_MonitorReply().replyBody()
                },
                Session.metrics.name: .immediate { [unowned self] body, _ in
                    _ = try Session.metrics.decodeRequest(body)
                    return self.metricsSnapshot().replyBody()
                },
            ],
            suspending: [
                Session.subscribe.name: { engine, body, call in
                    let request = try Session.subscribe.decodeRequest(body)
                    return try await engine.subscribe(call.connection.id, to: request).replyBody()
                }
            ],
            snapshotMethods: [Session.subscribe.name])
    }

    /// `service Plugin`: what a plugin process calls to register, publish and call on a caller's behalf.
    private func pluginNamespace() -> EngineHostedNamespace {
        typealias Plugin = MentorySchema.Plugin
        return EngineHostedNamespace(
            Plugin.info, engine: self,
            immediate: [
                Plugin.register.name: .immediate { [unowned self] body, call in
                    let request = try Self.decodePluginRequest(
                        Mentory_V1_PluginRegisterRequest.self, body, method: call.method)
                    return try self.registerPlugin(request, call: call).replyBody()
                },
                Plugin.publish.name: .immediate { [unowned self] body, call in
                    let request = try Self.decodePluginRequest(
                        Mentory_V1_PluginPublishRequest.self, body, method: call.method)
                    try self.publishFromPlugin(request, call: call)
                    return Mentory_V1_Empty().replyBody()
                },
            ],
            suspending: [
                Plugin.call.name: { engine, body, call in try await engine.callForPlugin(body, call: call) }
            ])
    }
}
