import Foundation
import MentoryDomain
import MentoryMallocCounter
import MentoryWire
import NIOCore
import SwiftProtobuf

#if canImport(Glibc)
    import Glibc
#endif

/// Allocation budgets for the hot paths, in heap allocations (malloc and friends) per request or event,
/// measured on a release build, as users run it (`swift build -c release --product mentory-allocation-guard`).
///
/// What is counted: everything the daemon's pipeline does from a frame entering it (after the socket read)
/// to its reply leaving it (before the socket write), engine and handler included, and the tasks the tick
/// queued on the event loop (the end-of-tick flush of the connections written to). Not counted: the socket's own
/// read buffer and writes, which the in-process channel does not have. Counted though not the daemon's: the
/// in-process loop's bookkeeping for each queued task (`NIOAsyncTestingEventLoop` allocates more per task than a
/// real event loop, which allocates only the closure, and nothing for the end-of-tick flush, whose closure is
/// made once).
///
/// Each budget is the figure measured on a release build (Swift 6.3.1, Linux; the guard prints the figures) plus
/// small headroom, about 10% and at least one allocation; its comment gives the measured figure. Counts are
/// deterministic: every tick allocates exactly the same. A guard over budget means the path now allocates more:
/// find out why, and raise the budget (with the new measured figure in its comment) only if that is intended.
/// Lower it when a change makes a path cheaper, so the guard keeps its grip.
enum AllocationBudget {
    /// `session.ping`, frame in to frame out through a `Connection` (on `ConnectionHandler`): measured 5.0 (7.0
    /// while each tick's reply had a buffer of its own, before the connection reused its small buffer; 9.0 while each
    /// read entered the engine through `assumeIsolated`, 10.0 while the end-of-tick flush made its closure each tick,
    /// 13.0 while each flush took a promise and a callback to learn when the kernel had taken its bytes).
    static let ping = 6.0
    /// `session.ping` pipelined, 16 requests to a read: their replies share one buffer and one flush. Measured
    /// 0.3125 (5 allocations a read; 0.5625 before the connection reused its small buffer, 0.6875 with
    /// `assumeIsolated` per read, 0.75 while the end-of-tick flush made its closure each tick, 2.81 before replies
    /// after a tick's first were written straight into the connection's coalescing buffer, each `Empty` reply
    /// having cost a buffer of its own, and 0.94 with a promise per flush). The headroom is about two allocations
    /// a read.
    static let pipelinedPing = 0.45
    /// `reachability.get` (a handler route answered without suspending, one peer known): measured 10.0 (12.0
    /// with `assumeIsolated` per read, 13.0 while the end-of-tick flush made its closure each tick, 16.0 with a
    /// promise per flush).
    static let reachabilityGet = 11.5
    /// `tick.publish`, answered and its event delivered to one subscriber: measured 7.0 (9.0 before the connection
    /// reused its small buffer, 11.0 with `assumeIsolated` per read, 12.0 while SwiftProtobuf encoded the event's
    /// frame, through an array of its own; 13.0 while the end-of-tick flush made its closure each tick, 19.0 with a
    /// promise per flush).
    static let publishToOneSubscriber = 8.0
    /// Each further subscriber of an event (the same encoded frame written to one more connection, flushed
    /// by the loop's shared end-of-tick flush): measured 0.0 (3.0 with a promise per flush). Half an
    /// allocation: one per subscriber would fail it.
    static let perSubscriber = 0.5
}

/// Requests before counting: every lazy cache, buffer and dictionary on the path reaches its steady size.
let warmUpRequests = 1_000
/// Requests counted; the figure is their allocations divided by this.
let measuredRequests = 10_000

/// A check the guard makes; a failed one fails the run.
struct GuardFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Fails the run with `message` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    guard condition else { throw GuardFailure(message()) }
}

/// Counts the allocations of `measuredRequests` requests sent as reads of `frames` on `connection`, one read
/// per event-loop tick (its `requestsPerRead` requests, their replies, the end-of-tick flush), after
/// `warmUpRequests` uncounted ones; the figure per request leaves out what counting itself costs
/// (``AllocationCounter/emptyTickAllocations(on:)``). Then one more read, uncounted, whose replies the sink keeps
/// (``Connection/lastFrame()``) for the caller to check.
func allocationsPerRequest(_ frames: ByteBuffer, requestsPerRead: Int = 1, on connection: Connection) async throws
    -> (total: AllocationCounts, perRequest: Double)
{
    let before = try await connection.sink().frames
    try await connection.keepLast(false)
    for _ in 0..<(warmUpRequests / requestsPerRead) {
        try await connection.send(frames)
    }
    let markerTask = try await AllocationCounter.emptyTickAllocations(on: connection.loop)
    var total = AllocationCounts()
    let reads = measuredRequests / requestsPerRead
    for _ in 0..<reads {
        total = total + (try await AllocationCounter.countTick(on: connection.loop) { connection.read(frames) })
    }
    let written = try await connection.sink().frames - before
    let requests = (warmUpRequests / requestsPerRead + reads) * requestsPerRead
    try check(written == requests, "one reply per request, \(requests) requests, but \(written) frames")
    try await connection.keepLast(true)
    try await connection.send(frames)
    return (total, (Double(total.allocations) - Double(markerTask * reads)) / Double(reads * requestsPerRead))
}

/// The guard: the malloc counter's self-check, then each hot path against its budget. Prints each figure; exits
/// 1 naming every path over its budget, 0 when all are within.
@main
enum AllocationGuard {
    static func main() async {
        guard AllocationCounter.isAvailable else {
            print("allocation guard: the malloc counter is compiled out (ThreadSanitizer or AddressSanitizer)")
            exit(1)
        }
        var failures: [String] = []
        let checks: [(String, () async throws -> Void)] = [
            ("the malloc counter", Self.counterCountsExactly),
            ("session.ping", Self.ping),
            ("session.ping, 16 to a read", Self.pipelinedPing),
            ("reachability.get", Self.reachabilityGet),
            ("tick.publish", Self.fanOut),
        ]
        for (name, run) in checks {
            do {
                try await run()
            } catch {
                print("allocation guard: FAILED \(name): \(error)")
                failures.append(name)
            }
        }
        guard failures.isEmpty else {
            print(
                "allocation guard: \(failures.count) of \(checks.count) checks failed: \(failures.joined(separator: ", "))"
            )
            exit(1)
        }
        print("allocation guard: all \(checks.count) checks passed")
    }

    /// The counter counts exactly the calling thread's allocations, frees and bytes, and nothing outside its window.
    static func counterCountsExactly() throws {
        guard let outside = malloc(16) else { throw GuardFailure("malloc failed") }
        AllocationCounter.begin()
        let result = mentory_malloc_counter_exercise()
        let counts = AllocationCounter.end()
        free(outside)
        free(malloc(8))
        try check(result == 0, "posix_memalign failed")
        // 100 mallocs, the calloc, the realloc (a free and an allocation), the posix_memalign.
        let expected = AllocationCounts(allocations: 103, frees: 103, bytes: 100 * 64 + 32 + 1000 + 128)
        try check(counts == expected, "the counter counted \(counts), not \(expected)")
    }

    /// `session.ping` through the connection pipeline, one request to a read.
    static func ping() async throws {
        try await Self.ping(requestsPerRead: 1, budget: AllocationBudget.ping)
    }

    /// `session.ping` pipelined: 16 requests in each read, answered in that read's tick.
    static func pipelinedPing() async throws {
        try await Self.ping(requestsPerRead: 16, budget: AllocationBudget.pipelinedPing)
    }

    /// `session.ping`, `requestsPerRead` requests (ids 1 and up) in each read, against `budget` per request.
    static func ping(requestsPerRead: Int, budget: Double) async throws {
        var server = try await InProcessServer()
        let connection = try await server.connect()
        var frames = ByteBuffer()
        for id in 1...requestsPerRead {
            var frame = Connection.frame(Connection.request(UInt64(id), "session", "ping"))
            frames.writeBuffer(&frame)
        }
        let totalBefore = AllocationCounter.total
        let (total, perRequest) = try await allocationsPerRequest(
            frames, requestsPerRead: requestsPerRead, on: connection)
        let reply = try await connection.lastFrame()
        try check(
            reply?.response.id == UInt64(requestsPerRead) && reply?.response.result == .body(Data()),
            "the last ping's reply: \(String(describing: reply))")
        try check(total.allocations > 0 && AllocationCounter.total > totalBefore, "the counter counted nothing")
        let reads = requestsPerRead == 1 ? "" : ", \(requestsPerRead) to a read"
        print("allocations: session.ping\(reads) \(perRequest) per request (\(total) over \(measuredRequests))")
        try check(
            perRequest <= budget,
            "session.ping\(reads) allocates \(perRequest) times per request, over its budget of \(budget)")
        try await connection.close()
    }

    /// `reachability.get`, a synchronous handler route.
    static func reachabilityGet() async throws {
        var server = try await InProcessServer()
        let connection = try await server.connect()
        var peer = Mentory_V1_PeerState()
        peer.peer = "phone"
        peer.isPaired = true
        peer.isReachable = true
        try await connection.send(Connection.request(1, "reachability", "report", try peer.serializedData()))
        let frame = Connection.frame(Connection.request(2, "reachability", "get"))
        let (total, perRequest) = try await allocationsPerRequest(frame, on: connection)
        let reply = try await connection.lastFrame()
        try check(reply?.response.id == 2, "a get's reply: \(String(describing: reply))")
        let snapshot = try Mentory_V1_ReachabilitySnapshot(serializedBytes: reply?.response.body ?? Data())
        try check(snapshot.peers.map(\.peer) == ["phone"], "the get's snapshot: \(snapshot)")
        try check(total.allocations > 0, "the counter counted nothing")
        print("allocations: reachability.get \(perRequest) per request (\(total) over \(measuredRequests))")
        let budget = AllocationBudget.reachabilityGet
        try check(perRequest <= budget, "reachability.get allocates \(perRequest) times per request, over \(budget)")
        try await connection.close()
    }

    /// An event fanned out to subscribers: per event, and per further subscriber.
    static func fanOut() async throws {
        var server = try await InProcessServer()
        let publisher = try await server.connect()
        var subscribers: [Connection] = []
        var request = Mentory_V1_SubscribeRequest()
        var topic = Mentory_V1_TopicSubscription()
        topic.topic = TickSchema.ticks.name
        request.topics = [topic]
        let subscribe = Connection.request(1, "session", "subscribe", try request.serializedData())
        func addSubscribers(_ count: Int) async throws {
            for _ in 0..<count {
                let subscriber = try await server.connect()
                try await subscriber.send(subscribe)
                // The Welcome, the reply and the snapshot.
                try await subscriber.waitForFrames(3)
                subscribers.append(subscriber)
            }
        }
        let frame = Connection.frame(Connection.request(1, "tick", "publish"))

        try await addSubscribers(1)
        let (one, perEventOne) = try await allocationsPerRequest(frame, on: publisher)
        let fewer = subscribers.count
        try await addSubscribers(8)
        let (many, perEventMany) = try await allocationsPerRequest(frame, on: publisher)
        let perSubscriber = (perEventMany - perEventOne) / Double(subscribers.count - fewer)

        for subscriber in subscribers {
            let last = try await subscriber.lastFrame()
            try check(
                last?.event.topic == TickSchema.ticks.name && last?.event.kind == .change,
                "a subscriber's last frame: \(String(describing: last))")
        }
        let received = try await subscribers[0].sink().frames
        try check(
            received == 3 + 2 * (warmUpRequests + measuredRequests + 1),
            "every event reached the first subscriber: \(received) frames")
        // Further subscribers may cost nothing (the same frame, written and flushed with no promise), never less.
        try check(one.allocations > 0 && many.allocations >= one.allocations, "the counter counted nothing")
        print(
            "allocations: tick.publish \(perEventOne) per event with 1 subscriber (\(one)), \(perEventMany) with"
                + " \(subscribers.count) (\(many)): \(perSubscriber) per further subscriber"
        )
        let eventBudget = AllocationBudget.publishToOneSubscriber
        try check(
            perEventOne <= eventBudget, "a publish to one subscriber allocates \(perEventOne), over \(eventBudget)")
        let subscriberBudget = AllocationBudget.perSubscriber
        try check(
            perSubscriber <= subscriberBudget,
            "each further subscriber costs \(perSubscriber) allocations per event, over \(subscriberBudget)")
        for connection in [publisher] + subscribers { try await connection.close() }
    }
}
