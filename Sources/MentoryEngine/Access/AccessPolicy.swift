import MentoryHandlerKit
import MentoryWire

/// Who may call which methods and subscribe to which topics.
///
/// Rules are tried in order and the first that matches the caller and the action decides. When
/// no rule matches, the action is allowed: the socket's file mode (0660 by default) already
/// admits only its owner and group. The superuser (uid 0) and the user the daemon runs as (its
/// peers could read the daemon's files anyway) pass every rule.
///
/// Privileged actions are closed whatever the rules leave out. A method's privilege, its
/// `(mentory.v1.privilege)` option, is checked before the rules
/// (``permits(_:credentials:daemonUID:)``): `PRIVILEGE_OWNER` methods (`session.monitor`, `plugin.*`,
/// `storage.*`, `daemon.reload`) are for root and the daemon's user, and for a uid or group that a
/// rule allows the method explicitly (``grantsExplicitly(_:rules:action:)``: the rule names a uid or
/// gid, not `any`, and the method or its namespace, not `*`); `PRIVILEGE_ROOT` methods (`debug.*`) are
/// for root alone. A topic that declares no `reads` is privileged the same way, through
/// `subscribe:TOPIC`. So no rule list opens a privileged action by leaving a default out: the default
/// policy has no rules.
///
/// A caller whose credentials are unknown (the kernel did not report them) fails closed: it
/// matches every deny rule, whoever the rule names, and no allow rule, and holds no privilege.
///
/// A rule is written `allow|deny WHO WHAT [WHAT...]`, where WHO is `any`, `uid=N` or `gid=N`
/// (primary or supplementary group), and WHAT is `namespace.method`, `namespace.*`, `*`,
/// `subscribe:topic` or `subscribe:*`. For example `deny any diary.*`,
/// `allow gid=1001 diary.get diary.list` followed by `deny gid=1001 diary.*`, or
/// `allow uid=1001 session.monitor`.
public struct AccessPolicy: Sendable, Equatable {
    /// One line of the policy.
    public struct Rule: Sendable, Equatable, CustomStringConvertible {
        public enum Principal: Sendable, Equatable {
            case any
            case uid(UInt32)
            case gid(UInt32)
        }

        public var allows: Bool
        public var principal: Principal
        public var actions: [String]

        public init(allows: Bool, principal: Principal, actions: [String]) {
            self.allows = allows
            self.principal = principal
            self.actions = actions
        }

        /// Parses `allow|deny WHO WHAT [WHAT...]`.
        public init(parsing text: String) throws(MentoryError) {
            let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
            guard words.count >= 3, words[0] == "allow" || words[0] == "deny" else {
                throw .invalidArgument("access rule '\(text)' must read: allow|deny WHO WHAT [WHAT...]")
            }
            self.allows = words[0] == "allow"
            switch words[1] {
            case "any":
                self.principal = .any
            case let who where who.hasPrefix("uid="):
                guard let uid = UInt32(who.dropFirst(4)) else {
                    throw .invalidArgument("access rule '\(text)': '\(who)' needs a numeric uid")
                }
                self.principal = .uid(uid)
            case let who where who.hasPrefix("gid="):
                guard let gid = UInt32(who.dropFirst(4)) else {
                    throw .invalidArgument("access rule '\(text)': '\(who)' needs a numeric gid")
                }
                self.principal = .gid(gid)
            default:
                throw .invalidArgument("access rule '\(text)': WHO must be any, uid=N or gid=N")
            }
            self.actions = Array(words[2...])
        }

        func matches(_ credentials: PeerCredentials) -> Bool {
            switch self.principal {
            case .any: true
            case .uid(let uid): credentials.uid == uid
            case .gid(let gid): credentials.isMember(of: gid)
            }
        }

        func matches(_ action: Action) -> Bool {
            self.actions.contains { action.matches(pattern: $0) }
        }

        /// Whether this rule grants `action` explicitly: an allow rule naming a uid or group (not `any`) with
        /// a pattern other than `*` or `subscribe:*` that names the action.
        func grantsExplicitly(_ action: Action) -> Bool {
            guard self.allows, self.principal != .any else { return false }
            return self.actions.contains { $0 != "*" && $0 != "subscribe:*" && action.matches(pattern: $0) }
        }

        /// WHO as the rule writes it: `any`, `uid=N` or `gid=N`.
        var principalDescription: String {
            switch self.principal {
            case .any: "any"
            case .uid(let uid): "uid=\(uid)"
            case .gid(let gid): "gid=\(gid)"
            }
        }

        public var description: String {
            "\(self.allows ? "allow" : "deny") \(self.principalDescription) \(self.actions.joined(separator: " "))"
        }
    }

    /// The rules, in order.
    public var rules: [Rule]

    public init(rules: [Rule]) {
        self.rules = rules
    }

    /// Parses one rule per string.
    public init(parsing lines: [String]) throws(MentoryError) {
        var rules: [Rule] = []
        for line in lines {
            rules.append(try Rule(parsing: line))
        }
        self.rules = rules
    }

    /// No rules: everything but the privileged methods and topics is open to the socket's group. Fault
    /// injection, storage administration, the traffic monitor (which sees every peer's calls) and plugin
    /// registration are closed by their privileges, which no rule list opens by omission.
    public static let `default` = AccessPolicy(rules: [])

    /// Whether a caller with `credentials` may call `namespace.method`.
    ///
    /// `nil` credentials (unknown) match every deny rule and no allow rule. A caller running as
    /// root or as `daemonUID` (the daemon's own user) may do anything.
    public func allowsCall(
        _ credentials: PeerCredentials?,
        namespace: String,
        method: String,
        daemonUID: UInt32? = nil
    ) -> Bool {
        self.allows(credentials, .call(namespace: namespace, method: method), daemonUID: daemonUID)
    }

    /// Whether a caller with `credentials` may subscribe to `topic`.
    ///
    /// Evaluated like ``allowsCall(_:namespace:method:daemonUID:)``.
    public func allowsSubscription(_ credentials: PeerCredentials?, topic: String, daemonUID: UInt32? = nil) -> Bool {
        self.allows(credentials, .subscription(topic: topic), daemonUID: daemonUID)
    }

    /// Whether a caller with `credentials` holds `privilege`, a method's `(mentory.v1.privilege)`.
    ///
    /// The engine asks this before the rules, wherever it checks a call: the privilege is a floor the
    /// rules cannot lower. `PRIVILEGE_OWNER` is held by root and by `daemonUID` (the daemon's own
    /// user), `PRIVILEGE_ROOT` by root alone, `PRIVILEGE_UNSPECIFIED` by everyone (the rules decide).
    /// Unknown credentials hold no privilege, and a privilege this build does not know is root's alone.
    public static func permits(
        _ privilege: Mentory_V1_Privilege, credentials: PeerCredentials?, daemonUID: UInt32?
    ) -> Bool {
        switch privilege {
        case .unspecified:
            return true
        case .owner:
            guard let credentials else { return false }
            return credentials.uid == 0 || credentials.uid == daemonUID
        case .root, .UNRECOGNIZED:
            return credentials?.uid == 0
        }
    }

    /// Who holds `privilege`, as a denial's log line says it; `nil` for `PRIVILEGE_UNSPECIFIED`.
    static func holders(of privilege: Mentory_V1_Privilege, daemonUID: UInt32?) -> String? {
        switch privilege {
        case .unspecified: nil
        case .owner: "root or the daemon's user\(daemonUID.map { " (uid \($0))" } ?? "")"
        case .root, .UNRECOGNIZED: "root"
        }
    }

    /// Whether a caller with `credentials` may call `namespace.method`, which declares `privilege`: a
    /// holder of the privilege (``permits(_:credentials:daemonUID:)``) as the rules decide, anyone else
    /// only when `PRIVILEGE_OWNER` is granted to them explicitly (``grantsExplicitly(_:rules:action:)``).
    public func allowsCall(
        _ credentials: PeerCredentials?, namespace: String, method: String, privilege: Mentory_V1_Privilege,
        daemonUID: UInt32? = nil
    ) -> Bool {
        let action = Action.call(namespace: namespace, method: method)
        return Self.allows(
            credentials, privilege: privilege, rules: self.rules.lazy.filter { $0.matches(action) }, action: action,
            daemonUID: daemonUID)
    }

    /// Whether a caller with `credentials` may subscribe to a topic that declares no `reads`, which is
    /// privileged: root and `daemonUID`, and a uid or group a rule allows `subscribe:TOPIC` explicitly.
    public func allowsPrivilegedSubscription(
        _ credentials: PeerCredentials?, topic: String, daemonUID: UInt32? = nil
    ) -> Bool {
        let action = Action.subscription(topic: topic)
        return Self.allows(
            credentials, privilege: .owner, rules: self.rules.lazy.filter { $0.matches(action) }, action: action,
            daemonUID: daemonUID)
    }

    /// The privileged actions this policy grants beyond the defaults, one line each as the daemon logs them:
    /// every explicit grant (``grantsExplicitly(_:rules:action:)``) of one of `privileged` (`namespace.method`
    /// names and `subscribe:TOPIC` names) by an allow rule.
    public func privilegedGrants(of privileged: [String]) -> [String] {
        var grants: [String] = []
        for rule in self.rules where rule.allows && rule.principal != .any {
            for name in privileged where rule.grantsExplicitly(Action(naming: name)) {
                grants.append("\(name) to \(rule.principalDescription) (rule \"\(rule)\")")
            }
        }
        return grants
    }

    /// Whether a caller with `credentials` may take `action`, which `privilege` guards and exactly `rules`
    /// name (in policy order): as ``allows(_:rules:daemonUID:)`` decides for a holder of the privilege; for
    /// anyone else only when the privilege is `PRIVILEGE_OWNER` and the first rules matching the caller
    /// grant it explicitly.
    static func allows(
        _ credentials: PeerCredentials?, privilege: Mentory_V1_Privilege, rules: some Sequence<Rule>,
        action: Action, daemonUID: UInt32?
    ) -> Bool {
        if Self.permits(privilege, credentials: credentials, daemonUID: daemonUID) {
            return Self.allows(credentials, rules: rules, daemonUID: daemonUID)
        }
        guard privilege == .owner else { return false }
        return Self.grantsExplicitly(credentials, rules: rules, action: action)
    }

    /// Whether `rules` (those naming `action`, in policy order) grant it to a caller with `credentials`
    /// explicitly: among the rules matching the caller, a deny comes no earlier than an allow rule that
    /// names the caller's uid or group (not `any`) and the action (not through `*`). Unknown credentials
    /// are granted nothing.
    static func grantsExplicitly(_ credentials: PeerCredentials?, rules: some Sequence<Rule>, action: Action) -> Bool {
        guard let credentials else { return false }
        for rule in rules where rule.matches(credentials) {
            if !rule.allows { return false }
            if rule.grantsExplicitly(action) { return true }
        }
        return false
    }

    private func allows(_ credentials: PeerCredentials?, _ action: Action, daemonUID: UInt32?) -> Bool {
        Self.allows(credentials, rules: self.rules.lazy.filter { $0.matches(action) }, daemonUID: daemonUID)
    }

    /// The rules whose WHAT names a call of `namespace.method`, in order: all that decide such a call,
    /// whoever makes it. The engine keeps them per method, so that a request's check compares no names.
    func rules(matchingCall namespace: String, method: String) -> [Rule] {
        let action = Action.call(namespace: namespace, method: method)
        return self.rules.filter { $0.matches(action) }
    }

    /// Whether a caller with `credentials` may take an action that exactly `rules` name (in policy order),
    /// as ``allowsCall(_:namespace:method:daemonUID:)`` decides.
    static func allows(_ credentials: PeerCredentials?, rules: some Sequence<Rule>, daemonUID: UInt32?) -> Bool {
        guard let credentials else {
            // Fail closed: an unknown caller might be whoever a deny rule names.
            return !rules.contains { !$0.allows }
        }
        if credentials.uid == 0 || credentials.uid == daemonUID { return true }
        for rule in rules where rule.matches(credentials) {
            return rule.allows
        }
        return true
    }
}

/// What a caller asks to do, as a rule's WHAT patterns name it: `namespace.method` for a call,
/// `subscribe:topic` for a subscription, or a privileged action's own name.
///
/// Matching compares the pattern with the action's parts in place, so a request's access check
/// builds no `namespace.method` string: it is on every request's path.
enum Action {
    case call(namespace: String, method: String)
    case subscription(topic: String)
    case named(String)

    private static let subscribePrefix = "subscribe:"

    /// The action `name` names: `subscribe:TOPIC`, `namespace.method`, or a name of its own.
    init(naming name: String) {
        if name.hasPrefix(Self.subscribePrefix) {
            self = .subscription(topic: String(name.dropFirst(Self.subscribePrefix.count)))
        } else if let dot = name.firstIndex(of: ".") {
            self = .call(namespace: String(name[..<dot]), method: String(name[name.index(after: dot)...]))
        } else {
            self = .named(name)
        }
    }

    /// Whether `pattern` (`*`, a prefix ending in `*`, or the whole action) names this action.
    /// `*` names every call and privileged action, but no subscription.
    func matches(pattern: String) -> Bool {
        let pattern = pattern.utf8
        if pattern.count == 1, pattern.first == UInt8(ascii: "*") {
            if case .subscription = self { return false }
            return true
        }
        if pattern.last == UInt8(ascii: "*") {
            return self.compare(with: pattern.dropLast()[...], prefixOnly: true)
        }
        return self.compare(with: pattern[...], prefixOnly: false)
    }

    /// Whether the action's text equals `pattern` or, with `prefixOnly`, starts with it.
    private func compare(with pattern: Substring.UTF8View, prefixOnly: Bool) -> Bool {
        var rest = pattern
        let consumed: Bool =
            switch self {
            case .call(let namespace, let method):
                Self.consume(namespace.utf8, from: &rest, prefixOnly: prefixOnly)
                    && Self.consume(".".utf8, from: &rest, prefixOnly: prefixOnly)
                    && Self.consume(method.utf8, from: &rest, prefixOnly: prefixOnly)
            case .subscription(let topic):
                Self.consume(Self.subscribePrefix.utf8, from: &rest, prefixOnly: prefixOnly)
                    && Self.consume(topic.utf8, from: &rest, prefixOnly: prefixOnly)
            case .named(let name):
                Self.consume(name.utf8, from: &rest, prefixOnly: prefixOnly)
            }
        return consumed && rest.isEmpty
    }

    /// Takes `part` off the front of `rest`. Where `rest` ends inside `part`, a prefix pattern has
    /// matched (the rest of the action is free) and a whole pattern has not.
    private static func consume(
        _ part: String.UTF8View, from rest: inout Substring.UTF8View, prefixOnly: Bool
    ) -> Bool {
        for byte in part {
            guard let expected = rest.first else { return prefixOnly }
            guard expected == byte else { return false }
            rest = rest.dropFirst()
        }
        return true
    }
}
