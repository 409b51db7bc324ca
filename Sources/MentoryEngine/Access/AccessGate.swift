import Logging
import MentoryHandlerKit
import MentoryWire

/// Who may do what, now: the ``AccessPolicy`` in force with the user trusted like root, the policy's
/// generation, and the rate limit of the log lines that say who was refused.
///
/// The engine holds one as a stored property and asks it before every call, subscription and
/// registration; it changes only when a reload replaces the policy. Invariants:
/// - ``generation`` counts the policies set, from 1, so that a ``MethodRoute`` that picked out its rules
///   under an older one picks them out again;
/// - at most one denial is logged per second; the ones in between are counted, and the next line
///   logged says how many (``denialLog(_:connection:byRulesOf:privilege:at:)``).
struct AccessGate {
    /// The rules in force.
    private(set) var policy: AccessPolicy
    /// Counts the policies set, from 1 (the one the engine started with).
    private(set) var generation: UInt64 = 1
    /// The user the daemon runs as, trusted like root; `nil` trusts only root.
    let daemonUID: UInt32?
    /// When the last denial was logged.
    private var lastDenialLogged: ContinuousClock.Instant?
    /// The denials refused since the last one logged, and not logged.
    private(set) var suppressedDenials = 0

    init(policy: AccessPolicy, daemonUID: UInt32?) {
        self.policy = policy
        self.daemonUID = daemonUID
    }

    /// Puts `policy` in force, from the next check on.
    mutating func replacePolicy(_ policy: AccessPolicy) {
        self.policy = policy
        self.generation += 1
    }

    // MARK: Decisions

    /// Whether the method `route` answers is open to every caller under the policy in force: it declares no
    /// privilege and no rule names it, as the route found when it last picked out its rules. Asked before
    /// ``allows(_:through:)``, so that such a call's check reads neither the caller's credentials nor the policy.
    @inline(__always)
    func isOpenToAll(_ route: MethodRoute) -> Bool {
        route.isOpenToAll(generation: self.generation)
    }

    /// Whether a caller with `credentials` may call the method `route` answers: its privilege first, then
    /// the rules naming it, which the route picks out once per ``generation``.
    func allows(_ credentials: PeerCredentials?, through route: MethodRoute) -> Bool {
        route.allows(credentials, policy: self.policy, generation: self.generation, daemonUID: self.daemonUID)
    }

    /// Whether a caller with `credentials` may call `namespace.method`, which declares `privilege`; for a
    /// name without a route (a method a plugin declared in a registration kept while it is away).
    func allowsCall(
        _ credentials: PeerCredentials?, namespace: String, method: String,
        privilege: Mentory_V1_Privilege = .unspecified
    ) -> Bool {
        self.policy.allowsCall(
            credentials, namespace: namespace, method: method, privilege: privilege, daemonUID: self.daemonUID)
    }

    /// Whether a caller with `credentials` may subscribe to `topic` as far as the `subscribe:` rules say.
    func allowsSubscription(_ credentials: PeerCredentials?, topic: String) -> Bool {
        self.policy.allowsSubscription(credentials, topic: topic, daemonUID: self.daemonUID)
    }

    /// Whether a caller with `credentials` may subscribe to `topic`, which declares no `reads` and so is
    /// privileged (``AccessPolicy/allowsPrivilegedSubscription(_:topic:daemonUID:)``).
    func allowsPrivilegedSubscription(_ credentials: PeerCredentials?, topic: String) -> Bool {
        self.policy.allowsPrivilegedSubscription(credentials, topic: topic, daemonUID: self.daemonUID)
    }

    /// `privilege` when a caller with `credentials` does not hold it
    /// (``AccessPolicy/permits(_:credentials:daemonUID:)``); `PRIVILEGE_UNSPECIFIED` when it does, or
    /// `privilege` is none, and the rules decide.
    func unheld(_ privilege: Mentory_V1_Privilege, by credentials: PeerCredentials?) -> Mentory_V1_Privilege {
        AccessPolicy.permits(privilege, credentials: credentials, daemonUID: self.daemonUID) ? .unspecified : privilege
    }

    // MARK: Denial log

    /// The metadata of the line that logs a refusal of `action` on `connection` at `now`, or `nil` when a
    /// denial was logged less than a second before: this one is then counted, and the next line logged
    /// says how many were (`suppressed`).
    ///
    /// A refusal by the rules of `namespace` names, in `fix`, the rule an operator would write to allow it;
    /// a refusal for want of `privilege`, which no rule grants, says in `needs` who holds it.
    mutating func denialLog(
        _ action: String, connection: ConnectionContext, byRulesOf namespace: String? = nil,
        privilege: Mentory_V1_Privilege = .unspecified, at now: ContinuousClock.Instant
    ) -> Logger.Metadata? {
        if let last = self.lastDenialLogged, now - last < .seconds(1) {
            self.suppressedDenials += 1
            return nil
        }
        var metadata: Logger.Metadata = [
            "action": "\(action)",
            "peer": "\(connection.credentials.map(\.description) ?? "unknown")",
            "client": "\(connection.clientName)",
            "suppressed": "\(self.suppressedDenials)",
        ]
        if let holders = AccessPolicy.holders(of: privilege, daemonUID: self.daemonUID) {
            metadata["needs"] = .string(
                privilege == .owner
                    ? "\(holders), or a uid or group access.rules allows it by name"
                        + (connection.credentials.map { " (\"allow uid=\($0.uid) \(action)\")" } ?? "")
                    : "\(holders): the method is privileged, and access.rules cannot grant it")
        } else if let namespace, let uid = connection.credentials?.uid {
            metadata["fix"] = .string(
                "to allow it, put \"allow uid=\(uid) \(namespace).*\" in access.rules before the rule that denies it")
        }
        self.lastDenialLogged = now
        self.suppressedDenials = 0
        return metadata
    }
}
