import Configuration
import Logging
import MentoryWire
import NIOCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A handler as its host keeps it, with the handler's type erased: its routes, its state and its
/// current configuration section.
///
/// Hosted handlers live on the host's executor (the engine's, or a test harness's) and are not
/// `Sendable`. Handlers never see this type: it is the host's side of the SDK.
package protocol HostedHandler: AnyObject {
    /// The namespace served.
    var namespace: String { get }
    /// The namespace's declaration: methods, topics, version.
    var info: NamespaceInfo { get }
    /// The descriptors of the `.proto` file that declares the namespace.
    var descriptors: SchemaDescriptors { get }

    /// Answers a call, suspending if its route does.
    ///
    /// `body` is the request message as it arrived (its frame's bytes, not a copy); the reply comes back serialized
    /// once, ready to be framed in place (``ProtobufBuffer/responseFrame(id:)``). Throws
    /// ``MentoryError/unknownMethod(namespace:method:)`` for a method without a route, and whatever the
    /// handler throws. Only the engine's gate calls it.
    nonisolated(nonsending) func respond(method: String, body: ByteBuffer, call: RequestContext) async throws
        -> ProtobufBuffer

    /// The route of `method`, looked up once so that the host can call it again without naming it;
    /// `nil` for a method without a route, or when the handler's routes may change (a plugin's).
    func resolve(method: String) -> ResolvedRoute?

    /// Takes `topic`'s snapshot: the body of snapshot and reset events.
    nonisolated(nonsending) func snapshot(of topic: String) async throws -> Data

    /// Tells the handler a connection went away.
    func connectionClosed(_ connection: ConnectionID)

    /// Hands the handler a reloaded configuration section and the daemon-wide settings as reloaded; keeps
    /// the old section if the handler refuses it (the settings are refreshed either way).
    func reload(config: ConfigReader, settings: GlobalSettings) throws

    /// Closes the handler.
    nonisolated(nonsending) func close() async
}

/// A handler's route for one method with the handler's type erased, as ``HostedHandler/resolve(method:)``
/// returns it: what the host keeps per method to answer it without looking its name up again.
package enum ResolvedRoute {
    /// Answers without suspending.
    case immediate((ByteBuffer, RequestContext) throws -> ProtobufBuffer)
    /// May suspend: the host answers it as a task, through ``HostedHandler/respond(method:body:call:)``. An
    /// `attempt`, when there is one, is called first, where the request arrives: a reply from it answers the
    /// request with no task; `nil` says the task must answer it.
    case suspending(attempt: ((ByteBuffer, RequestContext) throws -> ProtobufBuffer?)?)
}

extension HostedHandler {
    /// No route is resolved ahead: every call is routed by name.
    package func resolve(method: String) -> ResolvedRoute? { nil }
}

/// The hosted form of a handler of type `Handler`.
package final class Hosted<Handler: MentoryHandler>: HostedHandler {
    package let handler: Handler
    package let state: Handler.State
    package private(set) var config: ConfigReader {
        didSet { self.contextStorage = self.makeContextStorage() }
    }
    private let logger: Logger
    private let clock: any SessionClock
    package private(set) var settings: GlobalSettings {
        didSet { self.contextStorage = self.makeContextStorage() }
    }
    private let publisher: (String, inout ProtobufBuffer) -> Void
    private let caller: NamespaceCaller?
    private let jobs: BackgroundJobs
    private let routes: [String: HandlerRoutes<Handler>.Route]
    private let snapshots: [String: HandlerRoutes<Handler>.TakeSnapshot<Data>]
    /// The method called last and its route: calls mostly repeat a method, whose route is then found without
    /// hashing its name (``routes`` is a dictionary of a generic type: its look-up is not specialized).
    private var lastRoute: (method: String, route: HandlerRoutes<Handler>.Route)?
    /// What every call's context holds (``context``); made again when ``config`` or ``settings`` changes.
    private var contextStorage: HandlerContext<Handler>.Storage

    /// Hosts `handler`, already opened into `state`; its calls' contexts submit background work to `jobs` (by
    /// default none: ``HandlerContext/jobs`` refuses every job).
    ///
    /// Throws ``MentoryError/internal(_:)`` naming every method or topic of the namespace that the
    /// handler's routes leave unanswered.
    package init(
        _ handler: Handler,
        state: Handler.State,
        config: ConfigReader,
        logger: Logger,
        clock: any SessionClock,
        settings: GlobalSettings = GlobalSettings(),
        publisher: @escaping (String, inout ProtobufBuffer) -> Void,
        caller: NamespaceCaller? = nil,
        jobs: BackgroundJobs = .unavailable
    ) throws(MentoryError) {
        var routes = HandlerRoutes<Handler>()
        handler.routes(&routes)
        let problems = routes.problems
        guard problems.isEmpty else {
            throw .internal(
                "the \(Handler.Namespace.name) handler does not match its schema: \(problems.joined(separator: "; "))")
        }
        self.handler = handler
        self.state = state
        self.config = config
        self.logger = logger
        self.clock = clock
        self.settings = settings
        self.publisher = publisher
        self.caller = caller
        self.jobs = jobs
        self.routes = routes.routes
        self.snapshots = routes.snapshots
        self.contextStorage = HandlerContext<Handler>.Storage(
            state: state, config: config, logger: logger, clock: clock, settings: settings, publisher: publisher,
            caller: caller, jobs: jobs)
    }

    package var namespace: String { Handler.Namespace.name }
    package var info: NamespaceInfo { Handler.Namespace.info }
    package var descriptors: SchemaDescriptors { Handler.Namespace.fileDescriptors }

    /// The context calls get now: over storage made again only when the configuration or the settings change.
    package var context: HandlerContext<Handler> {
        HandlerContext(storage: self.contextStorage)
    }

    /// What ``context`` holds, as of the current configuration and settings.
    private func makeContextStorage() -> HandlerContext<Handler>.Storage {
        HandlerContext<Handler>.Storage(
            state: self.state, config: self.config, logger: self.logger, clock: self.clock,
            settings: self.settings, publisher: self.publisher, caller: self.caller, jobs: self.jobs)
    }

    package func resolve(method: String) -> ResolvedRoute? {
        // The context is made per call, as by name: a reload changes the configuration it carries.
        switch self.routes[method] {
        case .immediate(let respond):
            return .immediate { body, call in try respond(body, call, self.context) }
        case .suspending:
            return .suspending(attempt: nil)
        case .attempted(let attempt, _):
            return .suspending(attempt: { body, call in try attempt(body, call, self.context) })
        case nil:
            return nil
        }
    }

    package nonisolated(nonsending) func respond(method: String, body: ByteBuffer, call: RequestContext) async throws
        -> ProtobufBuffer
    {
        switch self.route(method) {
        case .immediate(let respond):
            return try respond(body, call, self.context)
        case .suspending(let respond), .attempted(_, otherwise: let respond):
            return try await respond(body, call, self.context)
        case nil:
            throw MentoryError.unknownMethod(namespace: self.namespace, method: method)
        }
    }

    /// The route of `method`, if the handler has one.
    private func route(_ method: String) -> HandlerRoutes<Handler>.Route? {
        if let last = self.lastRoute, last.method == method { return last.route }
        guard let route = self.routes[method] else { return nil }
        self.lastRoute = (method, route)
        return route
    }

    package nonisolated(nonsending) func snapshot(of topic: String) async throws -> Data {
        guard let take = self.snapshots[topic] else {
            throw MentoryError.internal("namespace '\(self.namespace)' has no topic '\(topic)'")
        }
        return try await take(self.context)
    }

    package func connectionClosed(_ connection: ConnectionID) {
        self.handler.connectionClosed(connection, context: self.context)
    }

    package func reload(config: ConfigReader, settings: GlobalSettings) throws {
        self.settings = settings
        let previous = self.config
        self.config = config
        do {
            try self.handler.reload(context: self.context)
        } catch {
            self.config = previous
            throw error
        }
    }

    package nonisolated(nonsending) func close() async {
        await self.handler.close(
            self.state,
            setup: HandlerSetup(
                namespace: self.namespace, config: self.config, logger: self.logger, clock: self.clock,
                settings: self.settings))
    }
}
