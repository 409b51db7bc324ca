import Configuration
import Logging
import MentoryWire
import NIOCore
import SwiftProtobuf

/// The host's side of ``HandlerContext/call(_:_:for:)``: calls `namespace.method` with `body` on behalf of
/// the caller of `call`, checking that caller's access, and returns the reply body.
package typealias NamespaceCaller =
    nonisolated(nonsending) (_ namespace: String, _ method: String, _ body: ByteBuffer, _ call: RequestContext)
    async throws -> ProtobufBuffer

/// What a handler sees of the daemon between calls: its own state, its own configuration
/// section, the right to publish on its own topics, and calls to other namespaces on a caller's behalf.
///
/// A context lives on the engine's executor for the duration of one call; it is not `Sendable`, so
/// it cannot leak into another task. Publishing is typed by the handler's ``MentoryHandler/Namespace``:
/// a handler cannot even name another namespace's topic.
public struct HandlerContext<Handler: MentoryHandler> {
    /// What the contexts of one handler's calls share, until a reload or a settings change replaces it: held by
    /// reference, so that a call's context costs one retain rather than one per field.
    package final class Storage {
        let state: Handler.State
        let config: ConfigReader
        let logger: Logger
        let clock: any SessionClock
        let settings: GlobalSettings
        let jobs: BackgroundJobs
        let publisher: (_ topic: String, _ body: inout ProtobufBuffer) -> Void
        let caller: NamespaceCaller?

        package init(
            state: Handler.State,
            config: ConfigReader,
            logger: Logger,
            clock: any SessionClock,
            settings: GlobalSettings,
            publisher: @escaping (_ topic: String, _ body: inout ProtobufBuffer) -> Void,
            caller: NamespaceCaller?,
            jobs: BackgroundJobs
        ) {
            self.state = state
            self.config = config
            self.logger = logger
            self.clock = clock
            self.settings = settings
            self.publisher = publisher
            self.caller = caller
            self.jobs = jobs
        }
    }

    private let storage: Storage

    /// The handler's state, as ``MentoryHandler/open(_:)`` returned it.
    public var state: Handler.State { self.storage.state }
    /// The handler's configuration section, `handlers.<namespace>`; a reload replaces it.
    public var config: ConfigReader { self.storage.config }
    /// A logger labelled with the namespace.
    public var logger: Logger { self.storage.logger }
    /// The source of wall-clock time.
    public var clock: any SessionClock { self.storage.clock }
    /// The daemon-wide settings a handler may read; a reload refreshes those that reload live.
    public var settings: GlobalSettings { self.storage.settings }
    /// The daemon's background jobs: work that outlives this call (e.g. a cleanup after a connection
    /// closed) and timers. Shut-down waits for them, within a deadline; see ``BackgroundJobs``. A
    /// context made with the public initializer has none: every submit is refused.
    public var jobs: BackgroundJobs { self.storage.jobs }

    /// Creates a context; the host does this, and so does the SDK's test support.
    ///
    /// `publisher` is called synchronously, on the caller's executor, for every publish. A context
    /// made here cannot call other namespaces (``call(_:_:for:)`` fails INTERNAL) and runs no background
    /// jobs (``jobs`` refuses them).
    public init(
        state: Handler.State,
        config: ConfigReader,
        logger: Logger,
        clock: any SessionClock,
        settings: GlobalSettings = GlobalSettings(),
        publisher: @escaping (_ topic: String, _ body: Data) -> Void
    ) {
        self.init(
            state: state, config: config, logger: logger, clock: clock, settings: settings,
            publisher: { topic, body in publisher(topic, Data(body.buffer.readableBytesView)) }, caller: nil,
            jobs: .unavailable)
    }

    /// Creates a context whose ``call(_:_:for:)`` goes through `caller` and whose background jobs are `jobs`.
    package init(
        state: Handler.State,
        config: ConfigReader,
        logger: Logger,
        clock: any SessionClock,
        settings: GlobalSettings,
        publisher: @escaping (_ topic: String, _ body: inout ProtobufBuffer) -> Void,
        caller: NamespaceCaller?,
        jobs: BackgroundJobs
    ) {
        self.storage = Storage(
            state: state, config: config, logger: logger, clock: clock, settings: settings, publisher: publisher,
            caller: caller, jobs: jobs)
    }

    /// A context over `storage`, which the host keeps between calls.
    package init(storage: Storage) {
        self.storage = storage
    }

    /// Calls `method` of another namespace on behalf of the client whose call `call` is, and returns its reply.
    ///
    /// The daemon checks that client's access to `method` (a client denied `diary.*` gets
    /// `PERMISSION_DENIED` however it reaches diary), the call shares `call`'s deadline (past it, it
    /// fails `DEADLINE_EXCEEDED`), it counts as one more of that client's requests in flight while it
    /// runs (a client at its uid's budget gets `TOO_MANY_REQUESTS` at once), and a call back into a
    /// namespace already on the way (`moods -> diary -> moods`) is refused with `INTERNAL`, naming the
    /// chain. List the namespaces a handler calls in its ``MentoryHandler/requires``,
    /// so that they open before it. Errors of the called namespace are thrown as they are; thrown on,
    /// they reach the client unchanged.
    nonisolated(nonsending) public func call<Target, Request, Reply>(
        _ method: MethodSchema<Target, Request, Reply>,
        _ request: Request,
        for call: RequestContext
    ) async throws -> Reply {
        guard let caller = self.storage.caller else {
            throw MentoryError.internal(
                "\(Handler.Namespace.name) cannot call \(method.namespace).\(method.name): this context has no host"
                    + " to call through (a test context; use the daemon or the engine)")
        }
        let reply = try await caller(method.namespace, method.name, request.replyBody().buffer, call)
        do {
            return try Reply(serializedBytes: reply)
        } catch {
            throw MentoryError.internal(
                "\(method.namespace).\(method.name) answered with a body that is not a valid"
                    + " \(Reply.protoMessageName): \(error)")
        }
    }

    /// Publishes `change` on `topic` to every subscriber, and keeps it in the topic's ring for
    /// subscribers that resume.
    ///
    /// Returns the change serialized: a route that answers with the change it published returns this
    /// (``Serialized``), and the change is serialized once for the reply and the event.
    @discardableResult
    public func publish<Change, Snapshot>(
        _ change: Change, on topic: TopicSchema<Handler.Namespace, Change, Snapshot>
    ) -> Serialized<Change> {
        // Serialized once; the host frames the event where the bytes are, and the reply shares them.
        var bytes = change.replyBody()
        self.storage.publisher(topic.name, &bytes)
        return Serialized(serialized: bytes)
    }
}

@available(*, unavailable)
extension HandlerContext: Sendable {}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
