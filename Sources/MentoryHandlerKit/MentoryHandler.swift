import MentoryWire
import SwiftProtobuf

/// A handler module: it serves one namespace, declared once in its `.proto` `service`, and
/// publishes on that namespace's topics.
///
/// A handler is a `Sendable` value holding what it was built with (a store, limits). What changes
/// while the daemon runs is its ``State``: the host creates it with ``open(_:)``, keeps it on the
/// engine's executor, and hands it to every call through a ``HandlerContext``, so a handler never
/// races itself and needs no locks. A handler never sees the host: it reaches the daemon only
/// through its contexts, which let it publish on its own topics and on nothing else.
///
/// ```swift
/// struct GreeterHandler: MentoryHandler {
///     typealias Namespace = GreeterSchema.Greeter
///
///     func routes(_ routes: inout HandlerRoutes<Self>) {
///         routes.on(Namespace.hello) { request, call, context in
///             var reply = Greeter_V1_HelloReply()
///             reply.greeting = "Hello, \(request.name)!"
///             return reply
///         }
///     }
/// }
/// ```
public protocol MentoryHandler: Sendable {
    /// The namespace served, as `protoc-gen-mentory` generated it from the `.proto` `service`.
    associatedtype Namespace: NamespaceSchema
    /// What the handler keeps between calls; it lives on the engine's executor.
    associatedtype State = Void

    /// Namespaces that must be open before this one and close after it.
    ///
    /// The configuration's `handlers.<namespace>.requires` adds to them.
    var requires: [String] { get }

    /// Prepares the handler, for example by loading its state from a store.
    ///
    /// Called once at start-up, after every namespace in ``requires`` opened. Throwing fails
    /// start-up with the error's message.
    func open(_ setup: HandlerSetup) async throws -> sending State

    /// Declares how each method is answered and how each topic's snapshot is taken.
    ///
    /// The host checks at start-up that every method and every topic of ``Namespace`` has one.
    func routes(_ routes: inout HandlerRoutes<Self>)

    /// Tells the handler that a connection went away.
    func connectionClosed(_ connection: ConnectionID, context: HandlerContext<Self>)

    /// Tells the handler that the configuration was reloaded; `context.config` holds the new section.
    ///
    /// Throwing refuses the reload of this section; the handler keeps its previous configuration.
    func reload(context: HandlerContext<Self>) throws

    /// Releases what ``open(_:)`` acquired, given the state it returned (as the calls left it), for the last time.
    ///
    /// Called once at shut-down, before the namespaces it requires close; no call runs during or after it.
    nonisolated(nonsending) func close(_ state: consuming State, setup: HandlerSetup) async
}

extension MentoryHandler {
    public var requires: [String] { [] }
    public func connectionClosed(_ connection: ConnectionID, context: HandlerContext<Self>) {}
    public func reload(context: HandlerContext<Self>) throws {}
    public nonisolated(nonsending) func close(_ state: consuming State, setup: HandlerSetup) async {}
}

extension MentoryHandler where State == Void {
    public func open(_ setup: HandlerSetup) async throws -> sending State { () }
}
