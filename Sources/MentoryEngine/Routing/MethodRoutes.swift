#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import CoreMetrics
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// A method the engine answers, resolved from its `namespace` and `method` names once: what answers
/// it, the access rules that name it and its metric objects, so that a request routed here hashes,
/// builds and allocates nothing to find them.
///
/// Every declared method has one, whoever serves it: the engine's own namespaces (`session`, `plugin`),
/// handlers registered in-process and plugins, resolved alike (``HandlerRegistry/answer(_:_:)``). A registration
/// that changes what is served bumps the generation of the engine's ``RouteTable``, and routes of an older
/// generation are made again on their next use.
/// Isolated to the engine.
final class MethodRoute {
    /// How a method is answered.
    enum Answer {
        /// Without suspending: the request is answered where it arrived, with no task. Called on the engine's
        /// executor, synchronously.
        case immediate((ByteBuffer, RequestContext) throws -> ProtobufBuffer)
        /// Possibly suspending: the request is answered from a task. The closure is isolated to the engine it
        /// is passed, so it runs on the engine's executor however it was made, and it can capture nothing
        /// that is not `Sendable`: what it needs of the engine's state it looks up in the engine.
        case suspending(Suspending)
        /// Attempted without suspending first, where the request arrives (as ``immediate(_:)``); when the attempt
        /// answers `nil`, it cannot, and `otherwise` answers the request from a task (as ``suspending(_:)``).
        case attempted((ByteBuffer, RequestContext) throws -> ProtobufBuffer?, otherwise: Suspending)
    }

    /// An answer that may suspend, isolated to the engine it is passed.
    typealias Suspending = (isolated MentoryEngine, ByteBuffer, RequestContext) async throws -> ProtobufBuffer

    let namespace: String
    let method: String
    /// ``namespace`` and ``method`` as a request's reader gives them, compared by ``RouteCache``.
    let namespaceName: RequestName
    let methodName: RequestName
    let answer: Answer
    /// Whether a handler or plugin may call the method on a client's behalf: not the engine's own namespaces'
    /// methods (``HandlerRegistry/connectionBound``), which act on the connection calling them.
    let callableOnBehalf: Bool
    /// Whether the method queues snapshot events for its caller before it answers (`session.subscribe`).
    let queuesSnapshots: Bool
    /// The ``RouteTable/generation`` when the route was made; an older route is made again.
    let generation: UInt64
    /// The request counters by result code, and the duration histogram, of this method.
    let metrics: EngineMetrics.MethodMetrics
    /// The method's `(mentory.v1.privilege)`, checked before the access rules.
    let privilege: Mentory_V1_Privilege
    /// The method, as every client's call to it names it in its context: made once, shared by all of them.
    let site: RequestContext.Site
    /// The access policy's rules that name this call, in order, as of ``accessGeneration`` (an ``AccessGate/generation``).
    private var accessRules: [AccessPolicy.Rule] = []
    private var accessGeneration: UInt64 = 0
    /// Whether, as of ``accessGeneration``, the method declares no privilege and no rule names it: every caller
    /// may call it.
    private var openToAll = false

    init(
        namespace: String, method: String, answer: Answer, callableOnBehalf: Bool, queuesSnapshots: Bool = false,
        privilege: Mentory_V1_Privilege = .unspecified, generation: UInt64, metrics: EngineMetrics.MethodMetrics
    ) {
        self.namespace = namespace
        self.method = method
        self.namespaceName = RequestName(namespace)
        self.methodName = RequestName(method)
        self.answer = answer
        self.callableOnBehalf = callableOnBehalf
        self.queuesSnapshots = queuesSnapshots
        self.generation = generation
        self.metrics = metrics
        self.privilege = privilege
        self.site = RequestContext.Site(method: method)
    }

    /// Whether the policy at `generation` lets every caller call this method, as the last
    /// ``allows(_:policy:generation:daemonUID:)`` at that generation found: `false` until one has.
    @inline(__always)
    func isOpenToAll(generation: UInt64) -> Bool {
        self.openToAll && self.accessGeneration == generation
    }

    /// Whether the policy (at `generation`, counted from 1) lets a caller with `credentials` call this
    /// method: its privilege first (``AccessPolicy/permits(_:credentials:daemonUID:)``), which only an
    /// explicit grant extends, then the rules naming the call, picked out once per policy
    /// (``AccessPolicy/allowsCall(_:namespace:method:privilege:daemonUID:)`` decides the same).
    func allows(
        _ credentials: PeerCredentials?, policy: AccessPolicy, generation: UInt64, daemonUID: UInt32?
    ) -> Bool {
        if self.accessGeneration != generation {
            self.accessRules = policy.rules(matchingCall: self.namespace, method: self.method)
            self.accessGeneration = generation
            self.openToAll = self.privilege == .unspecified && self.accessRules.isEmpty
        }
        if self.privilege == .unspecified {
            return AccessPolicy.allows(credentials, rules: self.accessRules, daemonUID: daemonUID)
        }
        return AccessPolicy.allows(
            credentials, privilege: self.privilege, rules: self.accessRules,
            action: .call(namespace: self.namespace, method: self.method), daemonUID: daemonUID)
    }
}

/// The routes a connection used last, so that its next request finds its route by comparing names as they
/// were read (a short name compares as two words, ``RequestName``) rather than hashing them, and no `String`
/// is made for a request whose route is cached.
///
/// Every route kept is current: ``MentoryEngine/invalidateRoutes()`` empties every connection's cache when it
/// starts a new route generation, so that a request needs no generation check.
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

    /// The cached route of `namespace.method`, if any. Mutating though it changes nothing, so that a cache in a
    /// class's property is read in place rather than copied (four retains and releases) to be read.
    @inline(__always)
    mutating func route(_ namespace: RequestName, _ method: RequestName) -> MethodRoute? {
        if let route = self.first, Self.matches(route, namespace, method) { return route }
        if let route = self.second, Self.matches(route, namespace, method) { return route }
        if let route = self.third, Self.matches(route, namespace, method) { return route }
        if let route = self.fourth, Self.matches(route, namespace, method) { return route }
        return nil
    }

    /// Whether `route` is the route of `namespace.method`: for two packed names (a non-zero `high`), four words
    /// compared, with no name copied; any other pair as names.
    @inline(__always)
    private static func matches(_ route: MethodRoute, _ namespace: RequestName, _ method: RequestName) -> Bool {
        if namespace.high != 0, method.high != 0 {
            return route.methodName.low == method.low && route.methodName.high == method.high
                && route.namespaceName.low == namespace.low && route.namespaceName.high == namespace.high
        }
        return route.methodName == method && route.namespaceName == namespace
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
    /// The route of `request`'s method for `connection`: from the connection's cache, else resolved in the
    /// engine's table (and cached). `nil` for a method nobody declares (or a plugin has not registered).
    /// Kept out of line: inlined into the request's path, the connection's cache was copied to be read.
    @inline(never)
    func route(of request: InboundRequest, for connection: Connection) -> MethodRoute? {
        if let route = connection.routes.route(request.namespaceName, request.methodName) { return route }
        return self.cacheRoute(of: request, for: connection)
    }

    /// Resolves `request`'s route and caches it for `connection`; kept out of line, so that the hot path it is
    /// called from stays small.
    @inline(never)
    private func cacheRoute(of request: InboundRequest, for connection: Connection) -> MethodRoute? {
        guard let route = self.resolveRoute(request.namespace, request.method) else { return nil }
        connection.routes.insert(route)
        return route
    }

    /// The engine-wide route of `namespace.method`, made on first use in each route generation. Only
    /// declared methods get one, so the table is bounded by what the daemon declares, whatever names
    /// clients send.
    func resolveRoute(_ namespace: String, _ method: String) -> MethodRoute? {
        if let route = self.registry.routes.route(namespace, method) { return route }
        self.hostEngineNamespaces()
        // One branch for every namespace: the engine's own, built-in and registered handlers, and plugins alike.
        guard let (info, answer, queuesSnapshots) = self.registry.answer(namespace, method) else { return nil }
        let route = MethodRoute(
            namespace: namespace, method: method, answer: answer,
            callableOnBehalf: !HandlerRegistry.connectionBound.contains(namespace), queuesSnapshots: queuesSnapshots,
            privilege: info.method(named: method)?.privilege ?? .unspecified,
            generation: self.registry.routes.generation,
            metrics: self.metrics.methodMetrics(
                namespace: namespace, method: method, declared: info.methods.map(\.name)))
        self.registry.routes.insert(route)
        return route
    }

    /// Forgets every route, after a registration changed what is served; each is made again on its next use.
    func invalidateRoutes() {
        self.registry.routes.invalidate()
        // A connection's cache holds only current routes (``RouteCache``).
        for connection in self.connections.values { connection.routes = RouteCache() }
        self.registry.describedDescriptorsCache = nil
    }

    /// Why `namespace.method` has no route: the namespace is unknown, its plugin cannot take calls now,
    /// or it declares no such method.
    func routeFailure(_ namespace: String, _ method: String) -> MentoryError {
        if let plugin = self.registry.plugins[namespace] {
            return self.registry.plugins.unavailability(of: plugin)
                ?? .unknownMethod(namespace: namespace, method: method)
        }
        if self.namespaceInfo(namespace) != nil {
            return .unknownMethod(namespace: namespace, method: method)
        }
        return .unknownNamespace(namespace)
    }
}
