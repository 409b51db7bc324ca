#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryWire

/// Which sockets a client is willing to talk to.
///
/// A Unix socket is only as trustworthy as whoever can create it. A client therefore uses a socket
/// only when both hold:
///
/// 1. **The directory.** The socket's directory (after resolving symbolic links) is owned by a
///    trusted user and is not writable by group or others; the sticky bit does not make it
///    acceptable, so `/tmp` itself is never accepted as the socket's directory. Every directory
///    above it is owned by a trusted user and is either not writable by group or others, or
///    sticky (like `/tmp`), so nobody else can rename it away and put their own in its place.
/// 2. **The peer.** After connecting, and before anything is written, the `SO_PEERCRED` uid of
///    the process listening on the socket is trusted. (With socket activation it is the uid
///    that created the listening socket: root for systemd.)
///
/// The trusted users are root, the caller (real and effective uid) and the daemon user:
/// `$MENTORY_DAEMON_USER` (a name or a numeric uid) if set, else ``defaultDaemonUser``, the
/// account `systemd/sysusers.d` creates and `mentoryd.service` runs as, looked up with
/// `getpwnam`. A user that does not exist on the machine is not trusted.
///
/// There is deliberately no switch that turns the checks off: a socket that fails them is either
/// misplaced (move it to a directory only its owner can write) or someone else's.
public struct SocketTrust: Sendable, Equatable {
    /// The name of the account the packaged daemon runs as.
    public static let defaultDaemonUser = "mentory"
    /// The environment variable that names another daemon account.
    public static let daemonUserEnvironmentKey = "MENTORY_DAEMON_USER"

    /// The uids trusted to own the socket's directories and to serve on it.
    ///
    /// For a ``standard(daemonUser:)`` trust, reading this looks the daemon user up; setting it trusts
    /// exactly the set given.
    public var trustedUIDs: Set<UInt32> {
        get {
            var trusted = Set(self.fixedUIDs)
            if self.looksUpDaemonUser, let uid = Self.uid(ofAccount: self.daemonUser) {
                trusted.insert(uid)
            }
            return trusted
        }
        set {
            self.fixedUIDs = Array(newValue)
            self.looksUpDaemonUser = false
        }
    }
    /// The daemon account's name as configured, for messages (it may not exist).
    public var daemonUser: String

    /// The uids trusted without a lookup (an array: a `Set`'s first use costs a short-lived client a
    /// runtime conformance lookup, and this holds three uids).
    private var fixedUIDs: [UInt32]
    /// Whether `daemonUser`'s uid is trusted too, looked up only when a uid outside `fixedUIDs` is checked:
    /// the lookup goes through NSS (`getpwnam`), which costs a short-lived client more than its call, and
    /// the socket of a daemon run by root or by the caller never needs it.
    private var looksUpDaemonUser: Bool

    /// Trusts exactly `trustedUIDs`; `daemonUser` only names the daemon account in messages.
    public init(trustedUIDs: Set<UInt32>, daemonUser: String = SocketTrust.defaultDaemonUser) {
        self.fixedUIDs = Array(trustedUIDs)
        self.daemonUser = daemonUser
        self.looksUpDaemonUser = false
    }

    private init(fixedUIDs: [UInt32], daemonUser: String, looksUpDaemonUser: Bool) {
        self.fixedUIDs = fixedUIDs
        self.daemonUser = daemonUser
        self.looksUpDaemonUser = looksUpDaemonUser
    }

    public static func == (lhs: SocketTrust, rhs: SocketTrust) -> Bool {
        Set(lhs.fixedUIDs) == Set(rhs.fixedUIDs) && lhs.daemonUser == rhs.daemonUser
            && lhs.looksUpDaemonUser == rhs.looksUpDaemonUser
    }

    /// Root, the caller and the daemon user, as described on the type; `daemonUser` (a name or
    /// a uid) replaces `$MENTORY_DAEMON_USER` when given.
    public static func standard(daemonUser: String? = nil) -> SocketTrust {
        let configured = daemonUser ?? getenv(Self.daemonUserEnvironmentKey).map { String(cString: $0) } ?? ""
        return SocketTrust(
            fixedUIDs: [0, getuid(), geteuid()], daemonUser: configured.isEmpty ? Self.defaultDaemonUser : configured,
            looksUpDaemonUser: true)
    }

    /// Whether `uid` is trusted: one of the fixed uids, or the daemon user's (looked up now, only then).
    public func trusts(uid: UInt32) -> Bool {
        if self.fixedUIDs.contains(uid) { return true }
        return self.looksUpDaemonUser && Self.uid(ofAccount: self.daemonUser) == uid
    }

    /// Checks the directories of the socket at `path` (rule 1); a directory that does not exist
    /// passes, since nothing can be connected to there.
    public func checkDirectory(ofSocket path: String) throws(MentoryClientError) {
        if let reason = self.directoryProblem(ofSocket: path) {
            throw .untrustedSocket(path: path, reason: reason)
        }
    }

    /// Checks the uid of the process serving the socket at `path` (rule 2).
    public func checkPeer(uid: UInt32, pid: Int32, path: String) throws(MentoryClientError) {
        guard !self.trusts(uid: uid) else { return }
        throw .untrustedSocket(
            path: path,
            reason: "the process serving it (pid \(pid)) runs as \(Self.describe(uid: uid)), which is not you, "
                + "root or the daemon user (\(self.describeDaemonUser())); it may be impersonating mentoryd. "
                + "Stop it or remove the socket, or pass --socket with the real daemon's socket"
        )
    }

    /// Why the directories of the socket at `path` are not trustworthy, or `nil` when they are.
    func directoryProblem(ofSocket path: String) -> String? {
        let absolute = path.hasPrefix("/") ? path : Self.currentDirectory() + "/" + path
        let directory = Self.parent(of: absolute)
        guard let resolved = Self.realPath(directory) else { return nil }
        var info = stat()
        guard stat(resolved, &info) == 0 else { return nil }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            return "\(resolved) is not a directory"
        }
        let advice = "move the socket to a directory only its owner can write, or pass --socket with another path"
        let mode = UInt32(info.st_mode) & 0o7777
        guard self.trusts(uid: info.st_uid) else {
            return "its directory \(resolved) is owned by \(Self.describe(uid: info.st_uid)), not by you, root or "
                + "the daemon user (\(self.describeDaemonUser())), so that user could be impersonating mentoryd; "
                + "remove the directory if you do not know it, or pass --socket with the real daemon's socket"
        }
        guard mode & 0o022 == 0 else {
            return "its directory \(resolved) has mode \(Self.octal(mode)): group or others can write it, "
                + "so anyone could put their own socket there; \(advice)"
        }
        var ancestor = resolved
        while ancestor != "/" {
            ancestor = Self.parent(of: ancestor)
            guard stat(ancestor, &info) == 0 else { return "cannot inspect \(ancestor) above the socket" }
            let mode = UInt32(info.st_mode) & 0o7777
            guard self.trusts(uid: info.st_uid) else {
                return "\(ancestor), above its directory, is owned by \(Self.describe(uid: info.st_uid)), who could "
                    + "replace the directory; \(advice)"
            }
            guard mode & 0o022 == 0 || mode & UInt32(S_ISVTX) != 0 else {
                return "\(ancestor), above its directory, has mode \(Self.octal(mode)) without the sticky bit, "
                    + "so group or others could replace the directory; \(advice)"
            }
        }
        return nil
    }

    private func describeDaemonUser() -> String {
        if let uid = Self.uid(ofAccount: self.daemonUser) {
            return "\(self.daemonUser), uid \(uid)"
        }
        return "\(self.daemonUser), which does not exist here; set \(Self.daemonUserEnvironmentKey) to change it"
    }

    /// The uid of an account given by name or as a number.
    static func uid(ofAccount account: String) -> UInt32? {
        UInt32(account) ?? Self.uid(ofUser: account)
    }

    static func uid(ofUser name: String) -> UInt32? {
        guard !name.isEmpty, let entry = getpwnam(name) else { return nil }
        return entry.pointee.pw_uid
    }

    static func describe(uid: UInt32) -> String {
        if let entry = getpwuid(uid), let name = entry.pointee.pw_name {
            return "uid \(uid) (\(String(cString: name)))"
        }
        return "uid \(uid)"
    }

    private static func octal(_ mode: UInt32) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let parent = String(path[..<slash])
        return parent.isEmpty ? "/" : parent
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func currentDirectory() -> String {
        guard let cwd = getcwd(nil, 0) else { return "." }
        defer { free(cwd) }
        return String(cString: cwd)
    }
}

/// Where clients look for the daemon's socket when nobody says.
public enum SocketLocator {
    /// The environment variable that names the socket explicitly.
    public static let socketEnvironmentKey = "MENTORY_SOCKET"

    /// The sockets tried, in order: the caller's own instance first, `$XDG_RUNTIME_DIR/mentoryd/mentoryd.sock`
    /// (a user instance, `systemctl --user`; `/run/user/UID/...` when `$XDG_RUNTIME_DIR` is unset, as under
    /// `su`), then its own daemon started by hand, `/tmp/mentoryd-UID/mentoryd.sock`, and last the shared system
    /// instance `/run/mentoryd/mentoryd.sock`, which ``locate(explicit:environment:trust:)`` tries only for a
    /// caller without a user instance (``UserInstance``).
    ///
    /// `$XDG_RUNTIME_DIR` is the caller's own directory (mode 0700), and the trust checks apply to it as to
    /// every candidate.
    public static func candidates(environment: [String: String], uid: UInt32 = getuid()) -> [String] {
        Self.ownCandidates(environment: environment, uid: uid) + [DefaultPaths.systemSocketPath]
    }

    /// The caller's own sockets: its user instance's (or, for root, a daemon it started under its own
    /// `$XDG_RUNTIME_DIR`) and its hand-started daemon's.
    static func ownCandidates(environment: [String: String], uid: UInt32) -> [String] {
        var candidates: [String] = []
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty {
            candidates.append(xdg + "/mentoryd/" + DefaultPaths.socketFileName)
        } else if uid != 0 {
            candidates.append("/run/user/\(uid)/mentoryd/" + DefaultPaths.socketFileName)
        }
        if uid != 0 {
            candidates.append("/tmp/mentoryd-\(uid)/" + DefaultPaths.socketFileName)
        }
        return candidates
    }

    /// The socket to use: `explicit` (from `--socket`), else `$MENTORY_SOCKET`, else the first
    /// candidate that exists, that the caller may connect to and that passes `trust`'s directory check.
    ///
    /// An explicit socket is returned as given (`MentoryClient.connect`
    /// checks it). Candidates that exist but fail the check are skipped; when none passes and
    /// some were skipped, this throws ``MentoryClientError/untrustedSocket(path:reason:)`` for
    /// the first one. A candidate the caller may not connect to (no write permission on the socket
    /// file, e.g. the system socket for someone outside the `mentory` group) is skipped too, and
    /// returned only when no other candidate is usable, so that the connection failure says why.
    /// When none exists it returns the first candidate, so the connection failure names it.
    ///
    /// A caller with a user instance (``UserInstance/isEnabled(uid:environment:root:)``) never falls back
    /// to the system instance: when none of its own sockets exists, this throws
    /// ``MentoryClientError/cannotConnect(path:reason:)`` naming them and how to start its instance.
    public static func locate(
        explicit: String? = nil,
        environment: [String: String],
        trust: SocketTrust = .standard()
    ) throws(MentoryClientError) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment[Self.socketEnvironmentKey], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        let uid = getuid()
        if UserInstance.isEnabled(uid: uid, environment: environment) {
            let own = Self.ownCandidates(environment: environment, uid: uid)
            guard own.contains(where: Self.exists) else {
                throw .cannotConnect(path: own[0], reason: UserInstance.notRunningReason(tried: own))
            }
            return try Self.firstTrusted(in: own, trust: trust)
        }
        return try Self.firstTrusted(in: Self.candidates(environment: environment, uid: uid), trust: trust)
    }

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The first of `candidates` that exists and passes the directory check, as in `locate`.
    public static func firstTrusted(in candidates: [String], trust: SocketTrust) throws(MentoryClientError)
        -> String
    {
        var refused: MentoryClientError?
        var forbidden: String?
        for candidate in candidates {
            var info = stat()
            guard lstat(candidate, &info) == 0 else { continue }
            if let reason = trust.directoryProblem(ofSocket: candidate) {
                refused = refused ?? .untrustedSocket(path: candidate, reason: reason)
                continue
            }
            // connect(2) needs write permission on the socket file (and search on its directories).
            guard access(candidate, W_OK) == 0 else {
                forbidden = forbidden ?? candidate
                continue
            }
            return candidate
        }
        if let refused { throw refused }
        return forbidden ?? candidates.first ?? DefaultPaths.systemSocketPath
    }
}
