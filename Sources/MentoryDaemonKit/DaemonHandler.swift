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
/// configuration is bad. Root and the daemon's own user only: mentory.proto declares `reload` with
/// `(privilege) = PRIVILEGE_OWNER`, and the engine refuses anyone else before the call gets here.
struct DaemonHandler: MentoryHandler {
    typealias Namespace = MentorySchema.Daemon

    let reloads: ReloadRequests

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.reload) { _, call, _ in
            let peer = call.credentials.map { "\($0)" } ?? "an unknown peer"
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
