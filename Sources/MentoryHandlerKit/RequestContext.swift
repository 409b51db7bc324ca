import Logging

/// What a handler knows about one call: who is calling, which request it is, and until when
/// an answer is useful.
public struct RequestContext: Sendable {
    /// Who makes a connection's calls, and the logger their contexts start from: shared by every call of the
    /// connection and held by reference, so that a call's context costs one retain for them, not one per field.
    package final class Caller: Sendable {
        package let connection: ConnectionContext
        package let logger: Logger

        package init(connection: ConnectionContext, logger: Logger) {
            self.connection = connection
            self.logger = logger
        }
    }

    /// The method a call is made to and the way it came: one per route, made once, for a client's own calls; one
    /// per call made on a caller's behalf. Held by reference, so that a call's context costs one retain for both.
    package final class Site: Sendable {
        /// The method called, e.g. `add`.
        package let method: String
        /// The namespaces passed through on the caller's behalf (see ``RequestContext/chain``).
        package let chain: [String]

        package init(method: String, chain: [String] = []) {
            self.method = method
            self.chain = chain
        }
    }

    /// The id the client gave the request; unique among its requests in flight.
    public let requestID: UInt64
    /// When the client stops waiting; work past it is wasted.
    public let deadline: ContinuousClock.Instant
    /// The calling connection and the logger, as the connection's every call shares them.
    package let caller: Caller
    /// The method called and the way the call came.
    package let site: Site

    /// The method being called, e.g. `add`.
    public var method: String { self.site.method }

    /// The namespaces this call passed through on the caller's behalf, outermost first, ending with
    /// the one answering it; empty for a call straight from a client (``HandlerContext/call(_:_:for:)``).
    package var chain: [String] { self.site.chain }

    /// The calling connection.
    public var connection: ConnectionContext { self.caller.connection }

    /// Creates a request context; the host does this, and so does the SDK's test support.
    public init(
        requestID: UInt64,
        method: String,
        connection: ConnectionContext,
        deadline: ContinuousClock.Instant,
        logger: Logger
    ) {
        self.init(
            requestID: requestID, site: Site(method: method), caller: Caller(connection: connection, logger: logger),
            deadline: deadline)
    }

    /// A context for a call made on the caller's behalf through `chain` (see ``chain``).
    package init(
        requestID: UInt64,
        method: String,
        connection: ConnectionContext,
        deadline: ContinuousClock.Instant,
        logger: Logger,
        chain: [String]
    ) {
        self.init(
            requestID: requestID, site: Site(method: method, chain: chain),
            caller: Caller(connection: connection, logger: logger), deadline: deadline)
    }

    /// A context for a call to `site` by `caller`'s connection, both of which the host keeps for all such calls.
    package init(requestID: UInt64, site: Site, caller: Caller, deadline: ContinuousClock.Instant) {
        self.requestID = requestID
        self.site = site
        self.caller = caller
        self.deadline = deadline
    }

    /// The caller's credentials as the kernel reported them; `nil` only when they could not be read.
    public var credentials: PeerCredentials? { self.connection.credentials }

    /// A logger carrying the request's metadata: request id, method, connection, peer and client.
    ///
    /// Built when asked for, so a call that logs nothing pays nothing for it.
    public var logger: Logger {
        var logger = self.caller.logger
        logger[metadataKey: "request"] = "\(self.requestID)"
        logger[metadataKey: "method"] = "\(self.method)"
        logger[metadataKey: "connection"] = "\(self.connection.id)"
        logger[metadataKey: "client"] = "\(self.connection.clientName)"
        if let credentials = self.connection.credentials {
            logger[metadataKey: "peer"] = "\(credentials)"
        }
        return logger
    }

    /// Whether the call should stop: its task was cancelled (the client went away, the daemon is
    /// stopping) or its deadline passed.
    public var isCancelled: Bool {
        Task.isCancelled || ContinuousClock.now >= self.deadline
    }

    /// Throws ``HandlerFailure/deadlineExceeded`` once ``isCancelled`` holds; call it between steps of long work.
    public func checkCancellation() throws(HandlerFailure) {
        guard !self.isCancelled else { throw .deadlineExceeded }
    }
}

/// Failures the SDK itself reports to handlers.
public enum HandlerFailure: Error, Sendable {
    /// The call was cancelled or its deadline passed.
    case deadlineExceeded
}
