import CoreMetrics
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// A method the engine answers, resolved from its `namespace` and `method` names once: what answers
/// it, the access rules that name it and its metric objects, so that a request routed here hashes,
/// builds and allocates nothing to find them.
///
/// Only methods whose routes cannot change get one: the `session` methods and those of handlers
/// registered in-process (which stay until the daemon stops). A plugin's namespace, `plugin.*`, and
/// names the daemon does not declare are routed by name (``MentoryEngine/dispatchImmediately(_:from:)``).
/// Isolated to the engine.
final class MethodRoute {
    enum Target {
        /// A method of the built-in `session` namespace.
        case session
        /// A registered handler's route.
        case handler(ResolvedRoute)
    }

    let namespace: String
    let method: String
    let target: Target
    /// The request counters by result code, and the duration histogram, of this method.
    let metrics: EngineMetrics.MethodMetrics
    /// The method's `(mentory.v1.privilege)`, checked before the access rules.
    let privilege: Mentory_V1_Privilege
    /// The access policy's rules that name this call, in order, as of ``accessGeneration``.
    private var accessRules: [AccessPolicy.Rule] = []
    private var accessGeneration: UInt64 = 0

    init(
        namespace: String, method: String, target: Target, metrics: EngineMetrics.MethodMetrics,
        privilege: Mentory_V1_Privilege = .unspecified
    ) {
        self.namespace = namespace
        self.method = method
        self.target = target
        self.metrics = metrics
        self.privilege = privilege
    }

    /// Whether the policy (at `generation`, counted from 1) lets a caller with `credentials` call this
    /// method: as ``AccessPolicy/allowsCall(_:namespace:method:daemonUID:)`` decides, with the rules
    /// naming the call picked out once per policy, after the method's privilege
    /// (``AccessPolicy/permits(_:credentials:daemonUID:)``), which the rules cannot grant.
    func allows(
        _ credentials: PeerCredentials?, policy: AccessPolicy, generation: UInt64, daemonUID: UInt32?
    ) -> Bool {
        guard AccessPolicy.permits(self.privilege, credentials: credentials, daemonUID: daemonUID) else { return false }
        if self.accessGeneration != generation {
            self.accessRules = policy.rules(matchingCall: self.namespace, method: self.method)
            self.accessGeneration = generation
        }
        return AccessPolicy.allows(credentials, rules: self.accessRules, daemonUID: daemonUID)
    }
}

/// The routes a connection used last, so that its next request finds its route by comparing names
/// (two small strings compare as two words) rather than hashing them.
///
/// Four slots rather than an array: an unspecialized array read allocates (a debug build's coroutine
/// frame), which would put allocations on every request's path in the allocation guard's build.
struct RouteCache {
    private var first: MethodRoute?
    private var second: MethodRoute?
    private var third: MethodRoute?
    private var fourth: MethodRoute?
    /// The slot the next route replaces once all are taken.
    private var next = 0

    /// The cached route of `namespace.method`, if any.
    func route(_ namespace: String, _ method: String) -> MethodRoute? {
        if let route = self.first, route.method == method, route.namespace == namespace { return route }
        if let route = self.second, route.method == method, route.namespace == namespace { return route }
        if let route = self.third, route.method == method, route.namespace == namespace { return route }
        if let route = self.fourth, route.method == method, route.namespace == namespace { return route }
        return nil
    }

    /// Keeps `route`, replacing the oldest once full.
    mutating func insert(_ route: MethodRoute) {
        switch self.next {
        case 0: self.first = route
        case 1: self.second = route
        case 2: self.third = route
        default: self.fourth = route
        }
        self.next = (self.next + 1) % 4
    }
}

extension MentoryEngine {
    /// The route of `namespace.method` for `connection`: from the connection's cache, else resolved in the
    /// engine's table (and cached). `nil` for a method routed by name: unknown, `plugin.*` or a plugin's.
    func route(_ namespace: String, _ method: String, for connection: Connection) -> MethodRoute? {
        if let route = connection.routes.route(namespace, method) { return route }
        guard let route = self.resolveRoute(namespace, method) else { return nil }
        connection.routes.insert(route)
        return route
    }

    /// The engine-wide route of `namespace.method`, made on first use. Only declared methods get one, so
    /// the table is bounded by what the daemon declares, whatever names clients send.
    private func resolveRoute(_ namespace: String, _ method: String) -> MethodRoute? {
        if let route = self.methodRoutes[namespace]?[method] { return route }
        let target: MethodRoute.Target
        let declared: [String]
        let privilege: Mentory_V1_Privilege
        if namespace == MentorySchema.Session.name {
            declared = MentorySchema.Session.methods.map(\.name)
            guard declared.contains(method) else { return nil }
            target = .session
            privilege = MentorySchema.Session.methods.first { $0.name == method }?.privilege ?? .unspecified
        } else if let handler = self.handlers[namespace], let resolved = handler.resolve(method: method) {
            declared = handler.info.methods.map(\.name)
            target = .handler(resolved)
            privilege = handler.info.method(named: method)?.privilege ?? .unspecified
        } else {
            return nil
        }
        let route = MethodRoute(
            namespace: namespace, method: method, target: target,
            metrics: self.metrics.methodMetrics(namespace: namespace, method: method, declared: declared),
            privilege: privilege)
        self.methodRoutes[namespace, default: [:]][method] = route
        return route
    }
}
