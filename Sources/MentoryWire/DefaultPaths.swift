#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the daemon puts its socket and where clients look for it when nobody says otherwise.
public enum DefaultPaths {
    /// The socket file's name inside its runtime directory.
    public static let socketFileName = "mentoryd.sock"

    /// The system-wide socket the packaged `mentoryd.socket` unit listens on.
    public static let systemSocketPath = "/run/mentoryd/mentoryd.sock"

    /// The socket path a daemon started in this environment binds by default.
    ///
    /// `$RUNTIME_DIRECTORY` (set by systemd) wins, then `$XDG_RUNTIME_DIR/mentoryd`,
    /// then `/run/mentoryd` for root, then `/tmp/mentoryd-UID`.
    public static func daemonSocketPath(environment: [String: String]) -> String {
        if let runtime = environment["RUNTIME_DIRECTORY"], !runtime.isEmpty {
            // systemd may pass several colon-separated directories; the first is ours.
            let first = runtime.split(separator: ":").first.map(String.init) ?? runtime
            return first + "/" + socketFileName
        }
        return self.userSocketCandidates(environment: environment)[0]
    }

    /// The daemon's own defaults for this user, most specific first. Clients search in their own
    /// order: the caller's `$XDG_RUNTIME_DIR` first, then `/run/mentoryd` (`SocketLocator` in MentoryClient).
    private static func userSocketCandidates(environment: [String: String]) -> [String] {
        var candidates: [String] = []
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty {
            candidates.append(xdg + "/mentoryd/" + socketFileName)
        }
        let uid = getuid()
        if uid == 0 {
            candidates.append(systemSocketPath)
        } else {
            candidates.append("/tmp/mentoryd-\(uid)/" + socketFileName)
        }
        return candidates
    }
}
