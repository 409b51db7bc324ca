#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryWire

/// Whether a person has a mentoryd of their own (a user instance, `systemctl --user`), as socket discovery
/// decides it: a client never writes such a person's data into the shared system instance because their
/// own instance was not running.
///
/// A caller has a user instance when it is an ordinary account (the units' `ConditionUser=!@system`: a
/// uid above 999, and not `nobody`) and `mentoryd.socket` is enabled for it, in its own user unit folder or for every user
/// (`systemctl --global enable`, as `scripts/install.sh` and the `mentoryd` package do), and not masked in
/// its own folder. Everyone else (root, system accounts, people who masked or never had the user units) may
/// fall back to the system instance.
public enum UserInstance {
    /// The enablement links of `mentoryd.socket` for every user, as `systemctl --global enable` and the
    /// package's `deb-systemd-helper --user` make them.
    static let globalWantsFolders = [
        "/etc/systemd/user/sockets.target.wants",
        "/usr/lib/systemd/user/sockets.target.wants",
        "/usr/local/lib/systemd/user/sockets.target.wants",
    ]

    /// The socket unit's file name.
    static let socketUnit = "mentoryd.socket"

    /// The highest uid of a system account (systemd's `SYS_UID_MAX` on Debian): no user instance below it.
    static let highestSystemUID: UInt32 = 999
    /// `nobody`, which has no home and no user manager of its own.
    static let nobodyUID: UInt32 = 65534

    /// Whether the caller with `uid` (and `HOME`, `XDG_CONFIG_HOME` in `environment`) has a user instance
    /// enabled; `root` is the folder the paths are read under (tests pass a temporary one).
    public static func isEnabled(uid: UInt32 = getuid(), environment: [String: String], root: String = "") -> Bool {
        guard uid > Self.highestSystemUID, uid != Self.nobodyUID else { return false }
        let userFolder = root + Self.userUnitFolder(uid: uid, environment: environment)
        // `systemctl --user mask mentoryd.socket` links it to /dev/null: the person opted out.
        if let target = Self.linkTarget(userFolder + "/" + Self.socketUnit), target == "/dev/null" {
            return false
        }
        let wants = [userFolder + "/sockets.target.wants"] + Self.globalWantsFolders.map { root + $0 }
        return wants.contains { Self.exists($0 + "/" + Self.socketUnit) }
    }

    /// How ``notRunningReason(tried:)`` begins.
    static let notRunningPrefix = "your own mentoryd (a user instance) is not running"

    /// Why discovery stopped instead of using the system instance: which sockets of the caller's own were
    /// tried, and how to start one's own instance or use the shared one deliberately.
    public static func notRunningReason(tried: [String]) -> String {
        Self.notRunningPrefix + ": tried \(tried.joined(separator: " and ")). Start it with"
            + " `systemctl --user start mentoryd.socket`, and `sudo loginctl enable-linger $USER` to keep it without"
            + " a login session. The shared system instance (\(DefaultPaths.systemSocketPath)) is not used in its"
            + " place, so that your entries never land in a diary others read; to use it on purpose, pass"
            + " --socket \(DefaultPaths.systemSocketPath) or set MENTORY_SOCKET"
    }

    /// `$XDG_CONFIG_HOME/systemd/user`, else `$HOME/.config/systemd/user`, else the passwd entry's home's.
    static func userUnitFolder(uid: UInt32, environment: [String: String]) -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return config + "/systemd/user"
        }
        let home: String
        if let fromEnvironment = environment["HOME"], fromEnvironment.hasPrefix("/") {
            home = fromEnvironment
        } else if let entry = getpwuid(uid), let directory = entry.pointee.pw_dir {
            home = String(cString: directory)
        } else {
            home = "/nonexistent"
        }
        return home + "/.config/systemd/user"
    }

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
