import MentoryHandlerKit
import MentoryWire

extension MentoryEngine {
    /// The `(mentory.v1.privilege)` method `namespace.method` declares: from the `session` and `plugin`
    /// schemas, or from the registered handler's (or plugin's registration's) method descriptions.
    /// `PRIVILEGE_UNSPECIFIED` for a method the daemon does not know (it is refused as unknown anyway).
    func privilege(_ namespace: String, _ method: String) -> Mentory_V1_Privilege {
        self.namespaceInfo(namespace)?.method(named: method)?.privilege ?? .unspecified
    }

    /// The privilege `namespace.method` declares when a caller with `credentials` does not hold it
    /// (``AccessPolicy/permits(_:credentials:daemonUID:)``); `PRIVILEGE_UNSPECIFIED` when it holds it
    /// or the method declares none, and the access rules decide.
    func unheldPrivilege(
        _ namespace: String, _ method: String, by credentials: PeerCredentials?
    ) -> Mentory_V1_Privilege {
        self.gate.unheld(self.privilege(namespace, method), by: credentials)
    }
}
