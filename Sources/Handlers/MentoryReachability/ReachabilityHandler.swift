#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryEngine
import MentoryWire

/// Serves the `reachability` namespace: whether each companion device is paired, has the app
/// installed and is reachable.
///
/// A peer reports its own state over a connection. When that connection closes, the peer is
/// marked unreachable and subscribers are told. Reachability describes live connections, so it is
/// not persisted: after a restart no peer is connected, and every peer reports again.
public struct ReachabilityHandler: MentoryHandler {
    /// The methods of the `reachability` namespace.
    public enum Method: String, CaseIterable, Sendable {
        case report
        case get
    }

    /// The longest peer name accepted, in UTF-8 bytes.
    public static var maxPeerNameLength: Int { FieldLimits.peerName.maximum }

    final class State: HandlerState {
        var peers: [String: Mentory_V1_PeerState] = [:]
        /// The connection that last reported each peer.
        var reporters: [String: ConnectionID] = [:]
        init() {}
    }

    public init() {}

    public var namespace: String { WireNames.reachability }
    public var methods: [String] { Method.allCases.map(\.rawValue) }
    public var topics: [String] { [WireNames.reachability] }

    public func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        guard let method = Method(rawValue: call.method) else {
            throw .unknownMethod(namespace: self.namespace, method: call.method)
        }
        let state = engine.state(State.self)
        switch method {
        case .get:
            try call.requireEmptyBody()
            return Self.snapshot(state).wireBody()
        case .report:
            var peer = try call.decode(Mentory_V1_PeerState.self)
            try Self.validate(peerName: peer.peer)
            if let known = state.peers[peer.peer] {
                state.reporters[peer.peer] = call.connection.id
                // The same state again changes nothing: no new timestamp, no event.
                if known.isPaired == peer.isPaired, known.isAppInstalled == peer.isAppInstalled,
                    known.isReachable == peer.isReachable
                {
                    return known.wireBody()
                }
            } else {
                try FieldLimits.peerCount.check(count: state.peers.count + 1, field: "the number of peers")
                state.reporters[peer.peer] = call.connection.id
            }
            peer.updatedAtUnixMs = engine.clock.nowUnixMilliseconds()
            state.peers[peer.peer] = peer
            engine.publish(peer, on: WireNames.reachability)
            return peer.wireBody()
        }
    }

    public func snapshot(of topic: String, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        Self.snapshot(engine.state(State.self)).wireBody()
    }

    public func connectionClosed(_ connection: ConnectionID, engine: isolated MentoryEngine) {
        let state = engine.state(State.self)
        let lost = state.reporters.filter { $0.value == connection }.keys.sorted()
        for name in lost {
            state.reporters[name] = nil
            guard var peer = state.peers[name], peer.isReachable else { continue }
            peer.isReachable = false
            peer.updatedAtUnixMs = engine.clock.nowUnixMilliseconds()
            state.peers[name] = peer
            engine.publish(peer, on: WireNames.reachability)
        }
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
