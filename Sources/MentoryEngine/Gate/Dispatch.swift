#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Logging
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// The one gate: every piece of work that runs a handler's or a plugin's code passes it, whoever asks for it.
///
/// ```
///   client request ─┐
///   nested call ────┤   dispatch(_:answerNow:)          complete(_:)
///   snapshot/reset ─┘   admit · route · check access     make the call (a route's answer,
///                       · budget · deadline              a handler's snapshot, a forward
///                       · answer at once if it can ───▶  to a plugin) · map errors · record
/// ```
///
/// ``MentoryEngine/dispatch(_:answerNow:)`` admits the work, routes it, checks the privilege and the access rules
/// for the person it is done for, applies that person's budget and the deadline, and answers at once what its
/// route answers without suspending (no task, nothing allocated). What may suspend it hands back admitted, and
/// ``MentoryEngine/complete(_:)`` makes the call. Errors are mapped in one place
/// (``MentoryEngine/failure(_:of:)``), and calls are recorded in one
/// (``MentoryEngine/settle(_:route:code:replyBytes:started:)``).
/// `respond(to:from:received:queued:)`, `call(_:_:body:for:from:)` and `sendState(of:to:kind:generation:)` are
/// thin callers; nothing else calls a route's answer, a handler's `respond` or `snapshot`, or forwards to a plugin.
/// A client's request passes the gate's request case in its lean form,
/// ``MentoryEngine/dispatch(_:from:received:answerNow:)``: the same checks, with no ``Dispatch/Work`` built for
/// a request answered at once.
enum Dispatch {
    /// What passes the gate.
    enum Work {
        /// A client's request, from connection `from`, which reached the engine at `received`.
        case request(InboundRequest, from: ConnectionID, received: ContinuousClock.Instant)
        /// A call made on behalf of the client whose call `Nested/call` is.
        case nested(Nested)
        /// The state of `topic`, as a snapshot or reset event (`kind`) for subscriber `for` carries it.
        case snapshot(topic: String, kind: Mentory_V1_EventKind, for: ConnectionID)
    }

    /// A call a handler or plugin makes on its caller's behalf (`context.call`, `plugin.call`).
    struct Nested {
        /// The namespace and method called.
        var namespace: String
        var method: String
        /// The request message.
        var body: ByteBuffer
        /// The call it is made for: its client, deadline and chain.
        var call: RequestContext
        /// The namespace that makes it.
        var caller: String

        /// The way the call came, ending with its caller (`streaks`, `streaks -> moods`).
        var chain: [String] { self.call.chain.last == self.caller ? self.call.chain : self.call.chain + [self.caller] }

        /// The chain with the call, as monitors and messages show it: `streaks -> diary.list`.
        var label: String { "\(self.chain.joined(separator: " -> ")) -> \(self.namespace).\(self.method)" }
    }

    /// What the call is made with once admitted.
    enum Target {
        /// A method's route.
        case route(MethodRoute)
        /// A topic's snapshot, taken by the handler hosting it.
        case handlerState(any HostedHandler, topic: String)
        /// A topic's snapshot, asked of the plugin serving `namespace`.
        case pluginState(namespace: String, topic: String)
    }

    /// Work the gate admitted, whose call may suspend.
    struct Admitted {
        let work: Work
        let target: Target
        /// The request message.
        let body: ByteBuffer
        /// The call's context; a snapshot has none.
        let call: RequestContext?
        /// Where a request's response goes, or whose call-on-behalf budget a nested call holds until it ends.
        let sink: (any EventSink)?
        let started: ContinuousClock.Instant

        /// The route, for work made through one.
        var route: MethodRoute? {
            if case .route(let route) = self.target { return route }
            return nil
        }
    }

    /// How work ended, or that it waits to be completed.
    enum Outcome {
        /// Answered: the reply, recorded already.
        case answered(ProtobufBuffer)
        /// A topic's state, for a snapshot or reset event.
        case state(Data)
        /// Refused or failed, recorded already (a nested call's refusal before its call is not recorded).
        case failed(Failure)
        /// Refused in a way the gate has dealt with: a snapshot for a subscriber that may no longer read its
        /// topic (its subscription ended), or for a topic no one publishes. Nothing is to be sent.
        case withheld
        /// Admitted, and to be completed with ``MentoryEngine/complete(_:)``.
        case admitted(Admitted)
    }

    /// What became of a client's request at the gate (``MentoryEngine/dispatch(_:from:received:answerNow:)``): its
    /// lean form, with no ``Work`` inside unless it was admitted.
    ///
    /// The cases other than `answered` are `indirect`: a failure and admitted work hold types whose layout is known
    /// only at run time (a generated message holds `Data`; `ContinuousClock.Instant`), and holding them inline made
    /// every request's outcome built and taken apart through the run time's enum functions.
    enum RequestOutcome {
        /// Answered: the reply, recorded already.
        case answered(ProtobufBuffer)
        /// Refused or failed, recorded already.
        indirect case failed(Failure)
        /// Admitted, and to be completed with ``MentoryEngine/complete(_:)``.
        indirect case admitted(Admitted)
    }

    /// An error, mapped once: what its client is told, and what a nested call or a snapshot throws.
    struct Failure {
        /// The error a nested call or a snapshot rethrows.
        var thrown: any Error
        /// The wire form a client gets.
        var wire: Mentory_V1_Error
    }
}

extension MentoryEngine {
    // MARK: The callers

    /// What ``respond(to:from:received:queued:)`` did with a request.
    package enum RequestOutcome {
        /// Answered already, without suspending (by a route that does not, or by a task started inline that did
        /// not): the response to send.
        case answered(OutboundResponse)
        /// Being answered by a task on the engine's executor. Its response goes to the connection's sink
        /// (``EventSink/answer(_:)``) when it is done, and is the task's value too. `queuesSnapshots` says
        /// that the method queues snapshot events for the connection before it answers (`session.subscribe`),
        /// for which the connection reserves room.
        case suspended(Task<OutboundResponse, Never>, queuesSnapshots: Bool)
    }

    /// Answers `request` from connection `id`, through the gate (``dispatch(_:answerNow:)``): the one way into
    /// the engine for every request, whatever namespace it names.
    ///
    /// A route that does not suspend is answered here, with no task, unless the request is `queued` behind
    /// others still in flight, which it must not overtake; any other runs as one of the engine's tasks
    /// (``EngineTasks``, waited for on shut-down). A request that is not queued, and whose method queues no
    /// snapshots, starts its task inline (`Task.immediate`): on the engine's executor it runs here up to its first
    /// real suspension, and if it never suspends (a change to the in-memory store) it is answered here too, with
    /// no task left running. Every failure becomes an error response. Nothing here closes the connection.
    ///
    /// The server calls this on the event loop, which is the engine's executor: a request answered at
    /// once costs no hop, and a suspended one's task cannot resume before the caller returns.
    package func respond(
        to request: InboundRequest,
        from id: ConnectionID,
        received: ContinuousClock.Instant,
        queued: Bool = false
    ) -> RequestOutcome {
        switch self.dispatch(request, from: id, received: received, answerNow: !queued) {
        case .answered(let body):
            return .answered(.success(id: request.id, body: body))
        case .failed(let failure):
            return .answered(.failure(id: request.id, error: failure.wire))
        case .admitted(let admitted):
            let queuesSnapshots = admitted.route?.queuesSnapshots ?? false
            // Started inline when nothing is to be reserved first: on the engine's executor, the task runs here
            // up to its first real suspension, and one that never suspends is answered like a route that does
            // not (no job, no hop). A queued request, and one that queues snapshots, start as before.
            let inline = !queued && !queuesSnapshots
            let taskID = inline ? self.tasks.reserveInline() : self.tasks.reserve()
            // The task takes the request's id, not the request (which `admitted` holds already).
            let id = request.id
            // The admitted work is moved into the task, not copied into it and destroyed here.
            let task: Task<OutboundResponse, Never>
            if inline {
                task = Task.immediate { [admitted = consume admitted] in
                    await self.answer(admitted, id: id, task: taskID)
                }
            } else {
                task = Task { [admitted = consume admitted] in
                    await self.answer(admitted, id: id, task: taskID)
                }
            }
            if inline, let response = self.tasks.endInline(taskID) { return .answered(response) }
            self.tasks.started(taskID, task)
            return .suspended(task, queuesSnapshots: queuesSnapshots)
        }
    }

    /// Completes a client's request admitted at the gate, as the engine's task `taskID`, and returns its response
    /// (for request `id`). One that ends while ``respond(to:from:received:queued:)`` still starts it inline is
    /// left for that to return (``EngineTasks/answeredInline(_:_:)``); any other goes to the connection's sink.
    private func answer(_ admitted: Dispatch.Admitted, id: UInt64, task taskID: UInt64) async -> OutboundResponse {
        let response: OutboundResponse =
            switch await self.complete(admitted) {
            case .answered(let body): .success(id: id, body: body)
            case .failed(let failure): .failure(id: id, error: failure.wire)
            default: .failure(id: id, error: MentoryError.internal("no reply").wireError)
            }
        // Ended before its start returned: `respond` answers it, and the task was never recorded as running.
        if self.tasks.answeredInline(taskID, response) { return response }
        // Always answered, even to a connection that detached meanwhile: its budget holds the request's
        // reservation until then.
        admitted.sink?.answer(response)
        self.tasks.ended(taskID)
        return response
    }

    /// Calls `namespace.method` for handler or plugin `caller`, on behalf of the client whose call `call` is
    /// (``HandlerContext/call(_:_:for:)``, `plugin.call`), through the gate.
    ///
    /// The client's access to the target is checked as if it called it itself, the call shares
    /// `call`'s deadline (one past it fails DEADLINE_EXCEEDED without running; a plugin target is
    /// failed at it), it counts as one more of the client's requests in flight for as long as it runs
    /// (``EventSink/startCallOnBehalf()``: a client at its budget gets TOO_MANY_REQUESTS,
    /// ``MentoryError/callerOverBudget(call:uid:)``), and a call into a namespace already on the call's
    /// way is refused (INTERNAL, naming the chain), so handlers calling each other cannot loop. It is counted
    /// in its method's metrics and shown to monitors with its chain.
    package func call(
        _ namespace: String,
        _ method: String,
        body: ByteBuffer,
        for call: RequestContext,
        from caller: String
    ) async throws -> ProtobufBuffer {
        let work = Dispatch.Work.nested(
            .init(namespace: namespace, method: method, body: body, call: call, caller: caller))
        var outcome = self.dispatch(work, answerNow: true)
        if case .admitted(let admitted) = outcome { outcome = await self.complete(admitted) }
        switch outcome {
        case .answered(let reply): return reply
        case .failed(let failure): throw failure.thrown
        default: throw MentoryError.internal("\(namespace).\(method) answered nothing")
        }
    }

    /// The state of `topic` for subscriber `id`'s snapshot or reset event (`kind`), through the gate; `nil` when
    /// the gate withheld it (the subscriber may no longer read the topic, and its subscription ended; or no one
    /// publishes the topic). Throws when the handler or plugin fails to take it.
    func state(of topic: String, for id: ConnectionID, kind: Mentory_V1_EventKind) async throws(MentoryError) -> Data? {
        var outcome = self.dispatch(.snapshot(topic: topic, kind: kind, for: id), answerNow: true)
        if case .admitted(let admitted) = outcome { outcome = await self.complete(admitted) }
        switch outcome {
        case .state(let body): return body
        case .failed(let failure):
            throw (failure.thrown as? MentoryError) ?? .internal("the snapshot of \(topic) failed")
        default: return nil
        }
    }

    // MARK: The gate

    /// Admits `work`, routes it, checks the privilege and the access rules for the person it is done for,
    /// applies that person's budget and the deadline; then, with `answerNow`, answers it at once if its route
    /// does not suspend. Returns what became of it, or the admitted work for ``complete(_:)``.
    /// Inlined into each caller, so that a request's work is not built as a value only to be taken apart again.
    @inline(__always)
    func dispatch(_ work: Dispatch.Work, answerNow: Bool) -> Dispatch.Outcome {
        let admitted: Dispatch.Admitted
        switch work {
        case .request(let request, let id, let received):
            switch self.dispatch(request, from: id, received: received, answerNow: answerNow) {
            case .answered(let reply): return .answered(reply)
            case .failed(let failure): return .failed(failure)
            case .admitted(let request): return .admitted(request)
            }
        case .nested(let nested):
            do {
                admitted = try self.admit(nested, work: work)
            } catch {
                // Refused before it was made: thrown to the caller as it is, and not counted as a call.
                return .failed(self.failure(error, of: work))
            }
        case .snapshot(let topic, let kind, let id):
            guard let owner = self.hub.owner(of: topic) else { return .withheld }
            let target: Dispatch.Target
            if let handler = self.registry.handlers[owner] {
                target = .handlerState(handler, topic: topic)
            } else if self.registry.plugins[owner] != nil {
                target = .pluginState(namespace: owner, topic: topic)
            } else {
                return .withheld
            }
            // Every snapshot and reset passes the topic's gate for the subscriber, as the subscribe did.
            if let connection = self.connections[id],
                let refusal = self.topicRefusal(topic, for: connection.context.credentials)
            {
                self.endSubscription(id, to: topic, sink: connection.sink, refusal: refusal)
                self.logDenial(
                    "subscribe:\(topic) (its \(kind == .reset ? "reset" : "snapshot"))", connection: connection.context)
                self.settleSnapshot(
                    of: topic, publishedBy: owner, for: id,
                    code: UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue),
                    bytes: 0, started: .now)
                return .withheld
            }
            admitted = Dispatch.Admitted(
                work: work, target: target, body: ByteBuffer(), call: nil, sink: nil, started: .now)
        }
        if answerNow, case .route(let route) = admitted.target, case .immediate(let answer) = route.answer {
            do {
                let reply = try answer(admitted.body, admitted.call!)
                self.settle(admitted, code: 0, replyBytes: reply.count)
                return .answered(reply)
            } catch {
                return self.failed(admitted, with: error)
            }
        }
        return .admitted(admitted)
    }

    /// The gate's entry for a client's request: ``dispatch(_:answerNow:)``'s checks, in the same order, without a
    /// ``Dispatch/Work`` built for a request answered at once. The engine is not shutting down, the connection
    /// completed its handshake, a route serves the name, the policy lets the connection through it; then, with
    /// `answerNow`, a route that does not suspend is answered here, and anything else is handed back admitted, for
    /// ``complete(_:)``. Errors are mapped by ``failure(_:of:)`` and every call ended here is recorded, as the
    /// gate's other work is.
    @inline(__always)
    func dispatch(
        _ request: InboundRequest, from id: ConnectionID, received: ContinuousClock.Instant, answerNow: Bool
    ) -> Dispatch.RequestOutcome {
        var route: MethodRoute?
        do {
            guard !self.registry.isShuttingDown else { throw MentoryError.shuttingDown }
            guard let connection = self.attachedConnection(id) else { throw MentoryError.handshakeRequired }
            route = self.route(of: request, for: connection)
            guard let route else { throw self.unrouted(request, connection: connection) }
            guard self.gate.isOpenToAll(route) || self.gate.allows(connection.context.credentials, through: route)
            else {
                throw self.denied(request, connection: connection)
            }
            let call = RequestContext(
                requestID: request.id,
                site: route.site,
                caller: connection.caller,
                deadline: received + self.timeout(of: request)
            )
            if answerNow {
                // The hot path: answered here, building nothing more than the call's context.
                let reply: ProtobufBuffer?
                switch route.answer {
                case .immediate(let answer): reply = try answer(request.body, call)
                case .attempted(let attempt, _): reply = try attempt(request.body, call)
                case .suspending: reply = nil
                }
                if let reply {
                    self.settle(request, from: id, route: route, code: 0, replyBytes: reply.count, started: received)
                    return .answered(reply)
                }
            }
            return .admitted(
                Dispatch.Admitted(
                    work: .request(request, from: id, received: received), target: .route(route), body: request.body,
                    call: call, sink: connection.sink, started: received))
        } catch {
            return .failed(self.refused(request, from: id, received: received, route: route, error: error))
        }
    }

    /// Maps and records the error a request ended with in ``dispatch(_:from:received:answerNow:)``; kept out of
    /// line, so that the hot path it is inlined into stays small.
    @inline(never)
    private func refused(
        _ request: InboundRequest, from id: ConnectionID, received: ContinuousClock.Instant, route: MethodRoute?,
        error: any Error
    ) -> Dispatch.Failure {
        let failure = self.failure(error, of: .request(request, from: id, received: received))
        self.settle(request, from: id, route: route, code: failure.wire.code, replyBytes: 0, started: received)
        return failure
    }

    /// Makes the call `admitted` work stands for: its route's answer, its handler's snapshot, or a forward to its
    /// plugin; maps its errors (``failure(_:of:)``) and records it.
    func complete(_ admitted: Dispatch.Admitted) async -> Dispatch.Outcome {
        do {
            switch admitted.target {
            case .route(let route):
                let reply: ProtobufBuffer
                switch route.answer {
                case .immediate(let answer): reply = try answer(admitted.body, admitted.call!)
                case .suspending(let answer), .attempted(_, otherwise: let answer):
                    reply = try await answer(self, admitted.body, admitted.call!)
                }
                self.settle(admitted, code: 0, replyBytes: reply.count)
                return .answered(reply)
            case .handlerState(let handler, let topic):
                let state = try await handler.snapshot(of: topic)
                // Taken on the engine's executor, as a route's answer is, and not interrupted: one that came after
                // its deadline is not sent, as a late plugin's is not.
                guard ContinuousClock.now < self.snapshotDeadline(of: admitted) else {
                    throw MentoryError.deadlineExceeded(
                        namespace: handler.namespace, method: "snapshot(\(topic))",
                        milliseconds: Int(Self.milliseconds(self.configuration.requestTimeout)))
                }
                self.settle(admitted, code: 0, replyBytes: state.count)
                return .state(state)
            case .pluginState(let namespace, let topic):
                let state = try await self.forwardToPlugin(
                    namespace, method: "", snapshotTopic: topic, body: Data(), call: nil,
                    deadline: self.snapshotDeadline(of: admitted))
                self.settle(admitted, code: 0, replyBytes: state.count)
                return .state(state)
            }
        } catch {
            return self.failed(admitted, with: error)
        }
    }

    /// Maps the error `admitted` work ended with (``failure(_:of:)``) and records it.
    private func failed(_ admitted: Dispatch.Admitted, with error: any Error) -> Dispatch.Outcome {
        let failure = self.failure(error, of: admitted.work)
        self.settle(admitted, code: failure.wire.code, replyBytes: 0)
        return .failed(failure)
    }

    /// When the state `admitted` work takes must be ready: `limits.requestTimeoutMilliseconds` after it was asked
    /// for, as a request's with no `timeout_ms` of its own (a plugin's is cut at its call timeout, if sooner).
    private func snapshotDeadline(of admitted: Dispatch.Admitted) -> ContinuousClock.Instant {
        admitted.started + self.configuration.requestTimeout
    }

    /// Admits a nested call: the engine is not shutting down, the call does not loop, a handler or plugin serves
    /// the target (the engine's own namespaces act on the connection calling them, so their routes are not
    /// ``MethodRoute/callableOnBehalf``), the client may call it itself, the deadline has not passed, and the
    /// client's uid has room for one more request in flight (held until ``settle(_:code:replyBytes:)``).
    private func admit(_ nested: Dispatch.Nested, work: Dispatch.Work) throws -> Dispatch.Admitted {
        guard !self.registry.isShuttingDown else { throw MentoryError.shuttingDown }
        let (namespace, method, call) = (nested.namespace, nested.method, nested.call)
        let chain = nested.chain
        guard !chain.contains(namespace) else {
            throw MentoryError.internal(
                "a call cycle was refused: \((chain + [namespace]).joined(separator: " -> ")) (\(namespace).\(method));"
                    + " a handler may call only namespaces that do not call it back")
        }
        let route = self.resolveRoute(namespace, method)
        guard route?.callableOnBehalf ?? self.registry.isCallableOnBehalf(namespace) else {
            throw MentoryError.internal(
                "\(nested.caller) called \(namespace).\(method), which no handler or plugin serves;"
                    + " only handler and plugin namespaces can be called on a caller's behalf")
        }
        let connection = call.connection
        // A route checks its method's privilege before the rules; a name without a route declares none.
        let allowed =
            if let route {
                self.gate.isOpenToAll(route) || self.gate.allows(connection.credentials, through: route)
            } else {
                self.gate.allowsCall(
                    connection.credentials, namespace: namespace, method: method,
                    privilege: self.privilege(namespace, method))
            }
        guard allowed else {
            self.logDenial(
                "\(namespace).\(method) (through \(chain.joined(separator: " -> ")))", connection: connection,
                byRulesOf: namespace, privilege: self.unheldPrivilege(namespace, method, by: connection.credentials))
            throw MentoryError.deniedOnBehalf(namespace: namespace, method: method, chain: chain)
        }
        guard let route else { throw self.routeFailure(namespace, method) }
        guard ContinuousClock.now < call.deadline else { throw HandlerFailure.deadlineExceeded }
        // Counted as one more request of the client's, for as long as it runs.
        guard let client = self.connections[connection.id] else {
            throw MentoryError.unavailable(
                "\(nested.label) was not made: the client it was made for has disconnected")
        }
        guard client.sink.startCallOnBehalf() else {
            self.logger.debug("call on a client's behalf over its uid's budget", metadata: ["call": "\(nested.label)"])
            throw MentoryError.callerOverBudget(call: nested.label, uid: connection.credentials?.uid)
        }
        let context = RequestContext(
            requestID: call.requestID, method: method, connection: connection, deadline: call.deadline,
            logger: self.logger, chain: chain + [namespace])
        return Dispatch.Admitted(
            work: work, target: .route(route), body: nested.body, call: context, sink: client.sink, started: .now)
    }

    // MARK: Errors, in one place

    /// `error`, which `work` ended with, mapped once: the wire form its client gets (causes and unexpected errors
    /// of a request are logged), and what a nested call rethrows (a handler's own error as its namespace reported
    /// it, its reason under its namespace; anything else as it is) or a snapshot throws.
    func failure(_ error: any Error, of work: Dispatch.Work) -> Dispatch.Failure {
        let namespace: String
        let method: String
        switch work {
        case .request(let request, _, _): (namespace, method) = (request.namespace, request.method)
        case .nested(let nested): (namespace, method) = (nested.namespace, nested.method)
        case .snapshot(let topic, _, _):
            self.logger.error(
                "snapshot failed: topic \(topic): \(Self.describe(error))",
                metadata: ["topic": "\(topic)", "error": "\(error)"])
            let thrown =
                (error as? MentoryError) ?? .internal("the snapshot of \(topic) failed: \(Self.describe(error))")
            return Dispatch.Failure(thrown: thrown, wire: thrown.wireError)
        }
        var isRequest = false
        if case .request = work { isRequest = true }
        let wire: Mentory_V1_Error
        switch error {
        case let error as MentoryError:
            if isRequest, case .internal = error {
                self.logger.error(
                    "request failed: \(namespace).\(method): \(error.message)",
                    metadata: ["namespace": "\(namespace)", "method": "\(method)", "error": "\(error)"]
                )
            }
            wire = error.wireError
        case let error as any HandlerError:
            if isRequest, let cause = error.underlyingError {
                self.logger.warning(
                    "request failed: \(namespace).\(method): \(error.message) (\(error.reason)); cause: \(cause)",
                    metadata: [
                        "namespace": "\(namespace)", "method": "\(method)",
                        "reason": "\(error.reason)", "cause": "\(cause)",
                    ]
                )
            }
            var handlerWire = Mentory_V1_Error(code: error.code, message: error.message)
            handlerWire.reason = "\(namespace).\(error.reason)"
            // Sent on as the called namespace reported it, its reason under its own namespace.
            if !isRequest { return Dispatch.Failure(thrown: PluginCallError(wire: handlerWire), wire: handlerWire) }
            wire = handlerWire
        case let error as PluginCallError:
            wire = error.wire
        case HandlerFailure.deadlineExceeded:
            var milliseconds = 0
            if case .request(let request, _, _) = work {
                milliseconds = Int(Self.milliseconds(self.timeout(of: request)))
            }
            wire =
                MentoryError.deadlineExceeded(namespace: namespace, method: method, milliseconds: milliseconds)
                .wireError
        default:
            if isRequest {
                self.logger.error(
                    "request failed with an unexpected error: \(namespace).\(method): \(error)",
                    metadata: ["namespace": "\(namespace)", "method": "\(method)", "error": "\(error)"]
                )
            }
            wire = MentoryError.internal("\(namespace).\(method) failed: \(error)").wireError
        }
        return Dispatch.Failure(thrown: error, wire: wire)
    }

    // MARK: Records, in one place

    /// Records a call `admitted` work made, ending with `code`: in its method's metrics, to monitors (a nested
    /// call with its chain), and gives back the call-on-behalf budget a nested call held.
    private func settle(_ admitted: Dispatch.Admitted, code: UInt32, replyBytes: Int) {
        switch (admitted.work, admitted.target) {
        case (.nested, _):
            admitted.sink?.finishCallOnBehalf()
        case (.snapshot(let topic, _, let id), .handlerState(let handler, _)):
            self.settleSnapshot(
                of: topic, publishedBy: handler.namespace, for: id, code: code, bytes: replyBytes,
                started: admitted.started)
            return
        case (.snapshot(let topic, _, let id), .pluginState(let namespace, _)):
            self.settleSnapshot(
                of: topic, publishedBy: namespace, for: id, code: code, bytes: replyBytes, started: admitted.started)
            return
        default:
            break
        }
        self.settle(admitted.work, route: admitted.route, code: code, replyBytes: replyBytes, started: admitted.started)
    }

    /// Counts the state of `topic` taken (or refused) for subscriber `id`, ended with `code`, in the snapshot metrics,
    /// and shows it to monitors as a call to `namespace`, the topic's publisher, naming the topic.
    private func settleSnapshot(
        of topic: String, publishedBy namespace: String, for id: ConnectionID, code: UInt32, bytes: Int,
        started: ContinuousClock.Instant
    ) {
        self.metrics.recordSnapshot(topic, code: code, duration: ContinuousClock.now - started)
        guard !self.observers.monitors.isEmpty else { return }
        self.monitorCall(
            namespace: namespace, method: "", requestID: 0, code: code, requestBytes: 0, replyBytes: bytes, chain: "",
            from: id, started: started, topic: topic)
    }

    /// Counts `work`, ended with `code` and a reply of `replyBytes`, in the request metrics (through `route`'s,
    /// when it has one) and shows it to monitors. A snapshot is counted in metrics of its own
    /// (``settleSnapshot(of:publishedBy:for:code:bytes:started:)``), not here.
    func settle(
        _ work: Dispatch.Work, route: MethodRoute?, code: UInt32, replyBytes: Int, started: ContinuousClock.Instant
    ) {
        switch work {
        case .request(let request, let id, _):
            self.settle(request, from: id, route: route, code: code, replyBytes: replyBytes, started: started)
        case .nested(let nested):
            // Counted in the method's metrics and shown to monitors like a client's own request, with its chain.
            route?.metrics.record(code: code, duration: ContinuousClock.now - started)
            guard !self.observers.monitors.isEmpty else { return }
            self.monitorCall(
                namespace: nested.namespace, method: nested.method, requestID: nested.call.requestID, code: code,
                requestBytes: nested.body.readableBytes, replyBytes: replyBytes, chain: nested.label,
                from: nested.call.connection.id, started: started)
        case .snapshot:
            return
        }
    }

    /// Counts a client's request in the request metrics (through `route`'s, when it has one) and shows it to
    /// monitors. Inlined into the request's hot path.
    @inline(__always)
    private func settle(
        _ request: InboundRequest, from id: ConnectionID, route: MethodRoute?, code: UInt32, replyBytes: Int,
        started: ContinuousClock.Instant
    ) {
        // A success answered after others in the batch being handled is counted in the batch, and recorded with them
        // when it closes (``closeBatch(received:)``), with one reading of the clock. Any other, the batch's first
        // included, is recorded now: a batch of one costs no more than no batch.
        if !self.metrics.countsInBatch(route?.metrics, code: code) {
            let duration = ContinuousClock.now - started
            if let route {
                route.metrics.record(code: code, duration: duration)
            } else {
                self.recordRequest(
                    namespace: request.namespace, method: request.method, code: code, duration: duration)
            }
        }
        guard !self.observers.monitors.isEmpty else { return }
        self.monitorCall(
            namespace: request.namespace, method: request.method, requestID: request.id, code: code,
            requestBytes: request.body.readableBytes, replyBytes: replyBytes, chain: "", from: id, started: started)
    }

    // MARK: Refusals

    /// The request's own `timeout_ms`, at most the configured default; the default when it names none.
    private func timeout(of request: InboundRequest) -> Duration {
        guard request.timeoutMs != 0 else { return self.configuration.requestTimeout }
        return min(.milliseconds(Int64(request.timeoutMs)), self.configuration.requestTimeout)
    }

    /// The error a request without a route gets: PERMISSION_DENIED when the policy refuses the name as it
    /// is (so that a refused caller learns nothing of what is served), else why nothing answers it.
    private func unrouted(_ request: InboundRequest, connection: Connection) -> MentoryError {
        guard
            self.gate.allowsCall(
                connection.context.credentials, namespace: request.namespace, method: request.method,
                privilege: self.privilege(request.namespace, request.method))
        else {
            return self.denied(request, connection: connection)
        }
        return self.routeFailure(request.namespace, request.method)
    }

    /// Logs (rate-limited) that the policy refused `request` on `connection`, and returns the error it gets.
    private func denied(_ request: InboundRequest, connection: Connection) -> MentoryError {
        let privilege = self.unheldPrivilege(request.namespace, request.method, by: connection.context.credentials)
        self.logDenial(
            "\(request.namespace).\(request.method)", connection: connection.context, byRulesOf: request.namespace,
            privilege: privilege)
        return MentoryError.permissionDenied(namespace: request.namespace, method: request.method)
    }
}
