import MentoryDomain
import MentoryHandlerKit
import MentoryWire

/// Serves the `reachability` namespace: whether each companion device is paired, has the app
/// installed and is reachable.
///
/// A peer reports its own state over a connection. When that connection closes, the peer is
/// marked unreachable and subscribers are told. Reachability describes live connections, so it is
/// not persisted: after a restart no peer is connected, and every peer reports again.
public struct ReachabilityHandler: MentoryHandler {
    public typealias Namespace = MentorySchema.Reachability

    /// The longest peer name accepted, in UTF-8 bytes.
    public static var maxPeerNameLength: Int { FieldLimits.peerName.maximum }

    /// The peers known since start-up.
    public final class State {
        var peers: [String: Mentory_V1_PeerState] = [:]
        /// The connection that last reported each peer.
        var reporters: [String: ConnectionID] = [:]
    }

    public init() {}

    public func open(_ setup: HandlerSetup) async throws -> sending State {
        State()
    }

    public func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.get) { _, _, context in
            Self.snapshot(context.state)
        }
        routes.on(Namespace.report) { peer, call, context in
            try Self.report(peer, from: call.connection.id, context: context)
        }
        routes.snapshot(Namespace.reachabilityTopic) { context in
            Self.snapshot(context.state)
        }
    }

    public func connectionClosed(_ connection: ConnectionID, context: HandlerContext<Self>) {
        let state = context.state
        let lost = state.reporters.filter { $0.value == connection }.keys.sorted()
        for name in lost {
            state.reporters[name] = nil
            guard var peer = state.peers[name], peer.isReachable else { continue }
            peer.isReachable = false
            peer.updatedAtUnixMs = context.clock.nowUnixMilliseconds()
            state.peers[name] = peer
            context.publish(peer, on: Namespace.reachabilityTopic)
        }
    }

    private static func report(
        _ report: Mentory_V1_PeerState,
        from connection: ConnectionID,
        context: HandlerContext<Self>
    ) throws(MentoryError) -> Serialized<Mentory_V1_PeerState> {
        let state = context.state
        var peer = report
        try Self.validate(peerName: peer.peer)
        if let known = state.peers[peer.peer] {
            state.reporters[peer.peer] = connection
            // The same state again changes nothing: no new timestamp, no event.
            if known.isPaired == peer.isPaired, known.isAppInstalled == peer.isAppInstalled,
                known.isReachable == peer.isReachable
            {
                return Serialized(known)
            }
        } else {
            try FieldLimits.peerCount.check(count: state.peers.count + 1, field: "the number of peers")
            state.reporters[peer.peer] = connection
        }
        peer.updatedAtUnixMs = context.clock.nowUnixMilliseconds()
        state.peers[peer.peer] = peer
        // Serialized once, for the event and the reply.
        return context.publish(peer, on: Namespace.reachabilityTopic)
    }

    private static func snapshot(_ state: State) -> Mentory_V1_ReachabilitySnapshot {
        var snapshot = Mentory_V1_ReachabilitySnapshot()
        snapshot.peers = state.peers.keys.sorted().map { state.peers[$0]! }
        return snapshot
    }

    static func validate(peerName: String) throws(MentoryError) {
        guard !peerName.isEmpty else {
            throw .invalidArgument("the peer name is empty")
        }
        try FieldLimits.peerName.check(peerName)
        let allowed = peerName.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-_.".unicodeScalars.contains(scalar)
        }
        guard allowed else {
            throw .invalidArgument("peer name '\(peerName)' may hold only letters, digits, '-', '_' and '.'")
        }
    }
}
