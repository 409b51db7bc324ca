#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif
import MentoryHandlerKit
import MentorySystemd
import MentoryWire

/// Serves the `daemon` namespace: `reload`, which re-reads the configuration and answers only
/// once it is applied, or with the reason it was not (the previous configuration then stays).
///
/// `ExecReload=mentoryctl reload` calls it so that `systemctl reload` fails when the new
/// configuration is bad. Root and the daemon's own user only.
struct DaemonHandler: MentoryHandler {
    typealias Namespace = MentorySchema.Daemon

    let reloads: ReloadRequests
    var ownerUID: UInt32 = geteuid()

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.reload) { _, call, _ in
            // An unknown peer (no SO_PEERCRED) counts as nobody.
            guard let peer = call.credentials, peer.uid == 0 || peer.uid == self.ownerUID else {
                throw MentoryError.permissionDenied(namespace: Namespace.name, method: call.method)
            }
            do {
                try await self.reloads.reload(trigger: "daemon.reload from \(peer)")
            } catch {
                throw MentoryError.invalidArgument(
                    "reload failed, the previous configuration stays in effect: \(error)")
            }
            return Mentory_V1_DaemonReloadReply()
        }
    }
}
