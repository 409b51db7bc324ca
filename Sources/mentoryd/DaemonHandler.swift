#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif
import MentoryEngine
import MentorySystemd
import MentoryWire

/// Serves the `daemon` namespace: `reload`, which re-reads the configuration and answers only
/// once it is applied, or with the reason it was not (the previous configuration then stays).
///
/// `ExecReload=mentoryctl reload` calls it so that `systemctl reload` fails when the new
/// configuration is bad. Root and the daemon's own user only.
struct DaemonHandler: MentoryHandler {
    static let namespace = "daemon"

    enum Method: String, CaseIterable {
        case reload
    }

    let reloads: ReloadRequests
    var ownerUID: UInt32 = geteuid()

    var namespace: String { Self.namespace }
    var methods: [String] { Method.allCases.map(\.rawValue) }

    func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        guard let method = Method(rawValue: call.method) else {
            throw .unknownMethod(namespace: self.namespace, method: call.method)
        }
        // An unknown peer (no SO_PEERCRED) counts as nobody.
        guard let peer = call.connection.credentials, peer.uid == 0 || peer.uid == self.ownerUID else {
            throw .permissionDenied(namespace: self.namespace, method: call.method)
        }
        switch method {
        case .reload:
            _ = try call.decode(Mentory_V1_DaemonReloadRequest.self)
            do {
                try await self.reloads.reload(trigger: "daemon.reload from \(peer)")
            } catch {
                throw .invalidArgument("reload failed, the previous configuration stays in effect: \(error)")
            }
            return Mentory_V1_DaemonReloadReply().wireBody()
        }
    }
}
