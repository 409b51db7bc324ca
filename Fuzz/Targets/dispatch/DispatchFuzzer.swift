// libFuzzer target `dispatch`: requests through a real `MentoryEngine` with the shipped handlers.
//
// Each input builds a fresh engine on a NIO event loop (as the daemon does) with the real
// `MentorHandler`, `ReachabilityHandler` and `DiaryHandler` over an `InMemorySessionStore`, then
// runs the input as a script of operations on up to four connections (see `Script.swift` for the
// byte layout). Operations run as tasks on the engine's executor in input order, exactly as the
// server's `ConnectionHandler` starts them, so requests of one batch interleave at their
// suspension points; a barrier operation waits for the batch.
//
// Invariants checked (a violation aborts, so libFuzzer keeps the input as a crash):
// - every request gets exactly one response, carrying the request's id;
// - a response holds either a body or an error; an error has a known, non-zero code that is not
//   `internal`, and a non-empty message;
// - requests before the handshake fail with `handshakeRequired`, after shutdown with
//   `shuttingDown`, to methods the default access policy denies an unknown peer (debug.*, storage.*)
//   with `permissionDenied`, to unknown namespaces and methods with `unknownNamespace`/`unknownMethod`;
// - a successful reply body decodes as the method's reply message and agrees with the request;
// - events a subscriber accepts carry the engine's epoch, decode as their topic's message, and
//   per topic form a gap-free sequence after each snapshot or reset (nothing lost, nothing
//   repeated), except where the subscriber asked to resume from an earlier position.

import Logging
import MentoryDiary
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryMentor
import MentoryReachability
import MentoryStorage
import MentoryWire
import NIOCore
import NIOPosix
import SwiftProtobuf
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Dispatch

/// The daemon runs the engine on an event loop; the fuzzer keeps one for the whole run.
private let eventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

/// Reports a broken invariant and aborts, so libFuzzer records the input as a crash.
func fail(_ message: String) -> Never {
    // fatalError prints the message and traps; libFuzzer reports it as a crash and saves the input.
    fatalError("dispatch invariant violated: \(message)")
}

/// A clock that always says the same time, so runs are repeatable.
struct FixedClock: SessionClock {
    func now() -> Date { Date(timeIntervalSince1970: 1_795_300_000) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDispatch(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Harness only: libFuzzer calls us synchronously, so block this (non-cooperative) thread until
    // the async run finishes. A hang in the engine shows up as a libFuzzer timeout.
    let done = DispatchSemaphore(value: 0)
    Task {
        await runScript(bytes)
        done.signal()
    }
    done.wait()
    return 0
}

/// The namespaces a handshake and `session.status` list: the engine's own two and the shipped handlers'.
private let expectedNamespaces: Set<String> = [
    WireNames.session, WireNames.plugin, WireNames.mentor, WireNames.reachability, WireNames.diary,
]

/// Ring capacities the first input byte picks from; small ones exercise wrap-around and resets.
private let ringCapacities = [4096, 1, 2, 3, 4, 8, 16, 64]

func runScript(_ bytes: [UInt8]) async {
    var reader = ByteReader(bytes)
    let capacity = ringCapacities[Int(reader.byte() & 0x7)]
    let engine = MentoryEngine(
        configuration: .init(serverVersion: "fuzz", eventRingCapacity: capacity),
        executor: eventLoopGroup.next().executor,
        clock: FixedClock(),
        logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    let store = InMemorySessionStore()
    do {
        try await engine.register(MentorHandler(store: store))
        try await engine.register(ReachabilityHandler())
        try await engine.register(DiaryHandler(store: store))
    } catch {
        fail("registering the shipped handlers failed: \(error)")
    }
    let model = Model(epoch: engine.epoch)
    var batch: [Operation] = []
    while let operations = Operation.read(from: &reader) {
        for operation in operations {
            if case .barrier = operation {
                await run(batch, engine: engine, model: model)
                batch.removeAll()
            } else {
                batch.append(operation)
            }
        }
    }
    await run(batch, engine: engine, model: model)

    // Tear down as the server does when connections close, then check the engine forgot them all.
    for connection in 0..<Model.connectionCount {
        await run([.detach(connection: connection)], engine: engine, model: model)
    }
    let (connections, subscribers) = await engine.connectionCounts()
    guard connections == 0, subscribers == 0 else {
        fail(
            "after every connection detached the engine still counts \(connections) connections, \(subscribers) subscribers"
        )
    }
}

extension MentoryEngine {
    fileprivate func connectionCounts() -> (Int, Int) { (self.connectionCount, self.subscriberCount) }
}

/// Starts every operation of a batch on the engine's executor, in order, then waits for all of them.
private func run(_ batch: [Operation], engine: MentoryEngine, model: Model) async {
    guard !batch.isEmpty else { return }
    let tasks = await start(batch, engine: engine, model: model)
    var responses = 0
    for task in tasks where await task.value {
        responses += 1
    }
    let requests = batch.count { $0.isRequest }
    guard responses == requests else {
        fail("\(requests) requests got \(responses) responses")
    }
}

/// Creates one task per operation while isolated to the engine, as the server's `onEngine` does,
/// so the tasks run on the engine's executor in creation order.
private func start(_ batch: [Operation], engine: isolated MentoryEngine, model: Model) -> [Task<Bool, Never>] {
    batch.map { operation in
        Task {
            await perform(operation, engine: engine, model: model)
        }
    }
}

/// Runs one operation; returns whether it was a request that got its response.
private func perform(_ operation: Operation, engine: isolated MentoryEngine, model: Model) async -> Bool {
    switch operation {
    case .barrier:
        return false
    case .attach(let connection):
        // The server refuses a second Hello on a connection; so does the harness.
        guard model.sink(of: connection) == nil else { return false }
        let sink = FuzzSink(epoch: engine.epoch)
        model.attached(connection, sink: sink)
        let welcome = engine.attach(
            ConnectionContext(id: ConnectionID(UInt64(connection)), clientName: "fuzz-\(connection)"),
            sink: sink
        )
        guard welcome.protocolVersion == WireProtocol.version, welcome.epoch == engine.epoch,
            Set(welcome.handlers.map(\.namespace)) == expectedNamespaces
        else {
            fail("unexpected welcome: \(welcome)")
        }
        return false
    case .detach(let connection):
        model.detached(connection)
        engine.detach(ConnectionID(UInt64(connection)))
        return false
    case .setAccepting(let connection, let accepting):
        model.sink(of: connection)?.setAccepting(accepting)
        return false
    case .drained(let connection):
        await engine.sinkDrained(ConnectionID(UInt64(connection)))
        return false
    case .shutdown:
        model.shutDown()
        await engine.closeHandlers()
        return false
    case .request(let connection, let call):
        let call = model.build(call)
        var request = Mentory_V1_Request()
        request.id = call.id
        request.namespace = call.namespace
        request.method = call.method
        request.body = call.body
        let attached = model.sink(of: connection)
        let shuttingDown = model.isShutDown
        // Resumes asked for here may replay events before the response; tell the sink.
        attached?.expectResumes(call.resumes)
        let response = await engine.respond(to: request, from: ConnectionID(UInt64(connection)))
        // A connection that detached while its request was suspended (a subscribe awaiting a
        // snapshot) is refused as not attached: the engine keeps nothing of it.
        let detachedMeanwhile = attached != nil && model.sink(of: connection) == nil
        let refusedAsDetached =
            detachedMeanwhile && response.error.code == UInt32(Mentory_V1_ErrorCode.handshakeRequired.rawValue)
        check(
            response, to: request, call: call, attached: attached != nil && !refusedAsDetached,
            shuttingDown: shuttingDown, engine: engine)
        if case .body(let body) = response.result {
            model.learn(from: call, reply: body)
        }
        return true
    }
}

/// The invariants of one response.
private func check(
    _ response: Mentory_V1_Response,
    to request: Mentory_V1_Request,
    call: Call,
    attached: Bool,
    shuttingDown: Bool,
    engine: isolated MentoryEngine
) {
    let what = "\(request.namespace).\(request.method) #\(request.id)"
    guard response.id == request.id else {
        fail("\(what) got a response for id \(response.id)")
    }
    switch response.result {
    case nil:
        fail("\(what) got a response with neither a body nor an error")
    case .error(let error):
        guard error.code != 0, let code = Mentory_V1_ErrorCode(rawValue: Int(error.code)),
            Mentory_V1_ErrorCode.allCases.contains(code)
        else {
            fail("\(what) failed with unknown code \(error.code): \(error.message)")
        }
        guard !error.message.isEmpty else { fail("\(what) failed with code \(code) and no message") }
        guard code != .internal else { fail("\(what) failed with an internal error: \(error.message)") }
        let expected: Mentory_V1_ErrorCode? =
            if shuttingDown { .shuttingDown } else if !attached {
                .handshakeRequired
            } else if !AccessPolicy.default.allowsCall(nil, namespace: call.namespace, method: call.method) {
                .permissionDenied
            } else if !call.namespaceExists { .unknownNamespace } else if !call.methodExists { .unknownMethod } else {
                nil
            }
        if let expected, code != expected {
            fail("\(what) failed with \(code) (\(error.message)); expected \(expected)")
        }
        if expected == nil, code == .unknownNamespace, describesUnknownNamespace(call) {
            // `session.describe` of a namespace nobody serves: the namespace in the body is unknown.
        } else if expected == nil,
            code == .shuttingDown || code == .handshakeRequired || code == .unknownNamespace
                || code == .unknownMethod
        {
            fail("\(what) failed with \(code) (\(error.message)) on an open connection to a known method")
        }
    case .body(let body):
        guard !shuttingDown, attached, call.namespaceExists, call.methodExists,
            AccessPolicy.default.allowsCall(nil, namespace: call.namespace, method: call.method)
        else {
            fail("\(what) succeeded (attached \(attached), shutting down \(shuttingDown))")
        }
        checkReply(body, to: call, what: what, engine: engine)
    }
}

/// Whether `call` is a `session.describe` whose body names a namespace the engine does not serve.
private func describesUnknownNamespace(_ call: Call) -> Bool {
    guard call.namespace == WireNames.session, call.method == MentorySchema.Session.describe.name,
        let request = try? Mentory_V1_DescribeRequest(serializedBytes: call.body)
    else { return false }
    return !request.namespace.isEmpty && !expectedNamespaces.contains(request.namespace)
}

/// A successful reply must decode as the method's reply message and agree with the request.
private func checkReply(_ body: Data, to call: Call, what: String, engine: isolated MentoryEngine) {
    func decode<M: SwiftProtobuf.Message>(_ type: M.Type) -> M {
        do {
            return try M(serializedBytes: body)
        } catch {
            fail("\(what) replied with a body that is not a \(M.protoMessageName): \(error)")
        }
    }
    func request<M: SwiftProtobuf.Message>(_ type: M.Type) -> M {
        guard let message = try? M(serializedBytes: call.body) else {
            fail("\(what) succeeded although its body is not a valid \(M.protoMessageName)")
        }
        return message
    }
    switch (call.namespace, call.method) {
    case (WireNames.session, MentorySchema.Session.ping.name),
        (WireNames.session, MentorySchema.Session.unsubscribe.name):
        _ = decode(Mentory_V1_Empty.self)
    case (WireNames.session, MentorySchema.Session.status.name):
        let reply = decode(Mentory_V1_StatusReply.self)
        let namespaces = Set(reply.handlers.map(\.namespace))
        guard reply.epoch == engine.epoch, namespaces == expectedNamespaces, reply.handlers.count == namespaces.count,
            reply.topics.count == 3
        else {
            fail("\(what): unexpected status \(reply)")
        }
    case (WireNames.session, MentorySchema.Session.subscribe.name):
        let reply = decode(Mentory_V1_SubscribeReply.self)
        let asked = request(Mentory_V1_SubscribeRequest.self)
        guard reply.epoch == engine.epoch, reply.topics.map(\.topic) == asked.topics.map(\.topic) else {
            fail("\(what): the reply \(reply) does not match the request \(asked)")
        }
    case (WireNames.session, MentorySchema.Session.describe.name):
        // Every namespace described is one the schema declares, with the methods it declares.
        let reply = decode(Mentory_V1_DescribeReply.self)
        for described in reply.namespaces {
            let builtIn = MentorySchema.namespaces + MentoryDomainSchema.namespaces
            guard let declared = builtIn.first(where: { $0.name == described.namespace }),
                described.methods.map(\.name) == declared.methods.map(\.name)
            else {
                fail("\(what): \(described.namespace) is not described as the schema declares it")
            }
        }
    case (WireNames.session, MentorySchema.Session.metrics.name):
        _ = decode(Mentory_V1_MetricsReply.self)
    case (WireNames.session, MentorySchema.Session.monitor.name):
        // The default policy keeps `monitor` to root; the harness's peers are unknown, so never here.
        fail("\(what) succeeded for a peer the default policy refuses it to")
    case (WireNames.mentor, MentorySchema.Mentor.set.name):
        let reply = decode(Mentory_V1_MentorState.self)
        let asked = request(Mentory_V1_MentorSetRequest.self)
        guard reply.message.content == asked.content, reply.message.character == asked.character,
            reply.message.actionItems.count == asked.actionItems.count,
            reply.message.actionItems.allSatisfy({ !$0.id.isEmpty }),
            Set(reply.message.actionItems.map(\.id)).count == reply.message.actionItems.count
        else {
            fail("\(what): the reply \(reply) does not match the request \(asked)")
        }
    case (WireNames.mentor, _):
        _ = decode(Mentory_V1_MentorState.self)
    case (WireNames.reachability, MentorySchema.Reachability.report.name):
        let reply = decode(Mentory_V1_PeerState.self)
        let asked = request(Mentory_V1_PeerState.self)
        guard reply.peer == asked.peer, !reply.peer.isEmpty else {
            fail("\(what): the reply \(reply) does not match the request \(asked)")
        }
    case (WireNames.reachability, _):
        let reply = decode(Mentory_V1_ReachabilitySnapshot.self)
        let names = reply.peers.map(\.peer)
        guard names == names.sorted(), Set(names).count == names.count else {
            fail("\(what): peers not sorted or repeated: \(names)")
        }
    case (WireNames.diary, MentorySchema.Diary.list.name):
        let reply = decode(Mentory_V1_DiaryListReply.self)
        let asked = request(Mentory_V1_DiaryListRequest.self)
        let limit = asked.limit == 0 ? DiaryHandler.defaultListLimit : Int(asked.limit)
        let dates = reply.entries.map(\.recordDate)
        guard dates.count <= limit, dates == dates.sorted(by: >), Set(dates).count == dates.count,
            !asked.hasBefore || dates.allSatisfy({ $0 < asked.before })
        else {
            fail("\(what): list of \(dates) breaks limit \(limit) / order / before \(asked.before)")
        }
    case (WireNames.diary, MentorySchema.Diary.add.name):
        let reply = decode(Mentory_V1_DiaryEntry.self)
        let asked = request(Mentory_V1_DiaryAddRequest.self)
        guard reply.recordDate == asked.recordDate, reply.title == asked.title, reply.text == asked.text,
            UUID(uuidString: reply.id) != nil, reply.actionItems.count == asked.actionItems.count
        else {
            fail("\(what): the reply \(reply) does not match the request \(asked)")
        }
    case (WireNames.diary, _):
        _ = decode(Mentory_V1_DiaryEntry.self)
    default:
        fail("\(what) succeeded in a namespace the harness does not know")
    }
}

extension MentoryEngine {
    /// Answers `request` as the server does (``respond(to:from:received:queued:)``), waiting for a suspended one;
    /// the bodies are copied. The fuzzer's own: the engine keeps no test-only entry of its own.
    fileprivate func respond(to request: Mentory_V1_Request, from id: ConnectionID) async -> Mentory_V1_Response {
        switch self.respond(to: InboundRequest(request), from: id, received: .now) {
        case .answered(let response): return response.wireResponse
        case .suspended(let task, _): return await task.value.wireResponse
        }
    }
}
