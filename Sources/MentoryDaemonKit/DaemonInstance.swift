#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryWire

/// Whose mentoryd this is, decided from the uid it runs as.
///
/// - The **system instance** runs as root or as the daemon account `mentory` (the packaged
///   `mentoryd.service` has `User=mentory`): a device's diary, shared by everyone its socket admits
///   (a kiosk, a companion device). It reads `/etc/mentoryd/mentoryd.json`.
/// - Any other uid makes a **user instance**: that person's own diary (the user units under
///   `systemctl --user`, or `scripts/run.sh`). It reads `$XDG_CONFIG_HOME/mentoryd/mentoryd.json`
///   (default `~/.config/mentoryd/mentoryd.json`), never `/etc`.
///
/// The uid decides rather than the environment (`$MANAGERPID`, `$XDG_RUNTIME_DIR`), which a parent
/// may set or leave out either way: a daemon running as a person serves that person's files, whoever
/// started it. `session.status` reports it, and `mentoryctl status` prints it.
struct DaemonInstance: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case user
        case system
    }

    /// The account the packaged system unit runs as (`systemd/sysusers.d`).
    static let systemAccount = "mentory"
    /// The config file's name inside its directory.
    static let configFileName = "mentoryd.json"
    /// The system instance's config file when systemd names no `ConfigurationDirectory=`.
    static let systemConfigFile = "/etc/mentoryd/mentoryd.json"

    var kind: Kind
    /// The uid the daemon runs as (effective).
    var uid: UInt32
    /// Its account name, when the user database has one.
    var userName: String?

    /// This process's instance.
    static func current() -> DaemonInstance {
        let uid = geteuid()
        let name = getpwuid(uid).flatMap { $0.pointee.pw_name }.map { String(cString: $0) }
        return DaemonInstance(kind: Self.kind(uid: uid, userName: name), uid: uid, userName: name)
    }

    /// `.system` for root and the daemon account, `.user` for anyone else.
    static func kind(uid: UInt32, userName: String?) -> Kind {
        uid == 0 || userName == Self.systemAccount ? .system : .user
    }

    /// The config file read when none is named (`--config`, `$MENTORYD_CONFIG`):
    /// `$CONFIGURATION_DIRECTORY/mentoryd.json` when systemd set it (`ConfigurationDirectory=`:
    /// `/etc/mentoryd` in the system unit, `~/.config/mentoryd` in the user unit); otherwise
    /// `/etc/mentoryd/mentoryd.json` for the system instance and
    /// `$XDG_CONFIG_HOME/mentoryd/mentoryd.json` (else `$HOME/.config/...`) for a user instance.
    func defaultConfigFile(environment: [String: String]) -> String {
        if let directories = environment["CONFIGURATION_DIRECTORY"], let first = directories.split(separator: ":").first
        {
            return first + "/" + Self.configFileName
        }
        switch self.kind {
        case .system:
            return Self.systemConfigFile
        case .user:
            if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
                return xdg + "/mentoryd/" + Self.configFileName
            }
            return self.homeDirectory(environment: environment) + "/.config/mentoryd/" + Self.configFileName
        }
    }

    /// `$HOME`, else the user database's home directory, else `/`.
    private func homeDirectory(environment: [String: String]) -> String {
        if let home = environment["HOME"], home.hasPrefix("/") { return home }
        if let entry = getpwuid(self.uid), let directory = entry.pointee.pw_dir {
            return String(cString: directory)
        }
        return "/"
    }

    /// As `session.status` reports it.
    var wire: Mentory_V1_DaemonInstance {
        var instance = Mentory_V1_DaemonInstance()
        instance.kind = self.kind == .user ? .user : .system
        instance.uid = self.uid
        instance.userName = self.userName ?? ""
        return instance
    }
}
