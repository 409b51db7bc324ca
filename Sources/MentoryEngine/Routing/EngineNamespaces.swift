import MentoryHandlerKit
import MentoryWire
import NIOCore

/// A namespace the engine serves itself, declared in mentory.proto like any other: `session` (every
/// client's) and `plugin` (plugin processes'). Its methods are routed like a handler's, through a
/// ``MethodRoute`` each; they differ only in acting on engine state (subscriptions, registrations)
/// rather than through a ``HandlerContext``.
struct EngineNamespace {
    /// The namespace's declaration.
    let info: NamespaceInfo
    /// What answers each method, by name.
    let answers: [String: MethodRoute.Answer]
    /// The methods that queue snapshot events for their caller before they answer.
    var snapshotMethods: Set<String> = []

    /// The declarations of both, `session` first, as `session.describe` lists them.
    static let declared = [MentorySchema.Session.info, MentorySchema.Plugin.info]
}

extension MentoryEngine {
    /// Both engine namespaces with their answers, `session` first. Made in the engine's isolation, so
    /// that their answers are isolated to it (they capture it unowned: the engine owns its routes).
    func makeEngineNamespaces() -> [EngineNamespace] {
        [self.sessionNamespace(), self.pluginNamespace()]
    }

    /// `service Session`: what every client may call.
    private func sessionNamespace() -> EngineNamespace {
        typealias Session = MentorySchema.Session
        return EngineNamespace(
            info: Session.info,
            answers: [
                Session.ping.name: .immediate { body, _ in
                    _ = try Session.ping.decodeRequest(body)
                    return Mentory_V1_Empty().replyBody()
                },
                Session.status.name: .immediate { [unowned self] body, _ in
                    _ = try Session.status.decodeRequest(body)
                    return self.status().replyBody()
                },
                Session.subscribe.name: .suspending { engine, body, call in
                    let request = try Session.subscribe.decodeRequest(body)
                    return try await engine.subscribe(call.connection.id, to: request).replyBody()
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
            snapshotMethods: [Session.subscribe.name])
    }

    /// `service Plugin`: what a plugin process calls to register, publish and call on a caller's behalf.
    private func pluginNamespace() -> EngineNamespace {
        typealias Plugin = MentorySchema.Plugin
        return EngineNamespace(
            info: Plugin.info,
            answers: [
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
                Plugin.call.name: .suspending { engine, body, call in
                    try await engine.callForPlugin(body, call: call)
                },
            ])
    }
}
