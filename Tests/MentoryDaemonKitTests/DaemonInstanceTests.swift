import Testing

@testable import MentoryDaemonKit

@Suite("Whose mentoryd this is: a user instance or the system instance")
struct DaemonInstanceTests {
    @Test("root and the daemon account are the system instance; anyone else a user instance")
    func kind() {
        #expect(DaemonInstance.kind(uid: 0, userName: "root") == .system)
        #expect(DaemonInstance.kind(uid: 0, userName: nil) == .system)
        #expect(DaemonInstance.kind(uid: 998, userName: "mentory") == .system)
        #expect(DaemonInstance.kind(uid: 1001, userName: "alice") == .user)
        #expect(DaemonInstance.kind(uid: 4_000_001, userName: nil) == .user)
    }

    @Test("systemd's ConfigurationDirectory= comes first, in either kind")
    func configurationDirectory() {
        let environment = ["CONFIGURATION_DIRECTORY": "/home/alice/.config/mentoryd", "HOME": "/home/alice"]
        let alice = DaemonInstance(kind: .user, uid: 1001, userName: "alice")
        let system = DaemonInstance(kind: .system, uid: 998, userName: "mentory")
        #expect(alice.defaultConfigFile(environment: environment) == "/home/alice/.config/mentoryd/mentoryd.json")
        #expect(
            system.defaultConfigFile(environment: ["CONFIGURATION_DIRECTORY": "/etc/mentoryd:/etc/other"])
                == "/etc/mentoryd/mentoryd.json")
    }

    @Test("without systemd, a user instance reads its XDG config file, never /etc; the system instance /etc")
    func withoutSystemd() {
        let alice = DaemonInstance(kind: .user, uid: 1001, userName: "alice")
        #expect(
            alice.defaultConfigFile(environment: ["XDG_CONFIG_HOME": "/srv/alice/config", "HOME": "/home/alice"])
                == "/srv/alice/config/mentoryd/mentoryd.json")
        #expect(
            alice.defaultConfigFile(environment: ["HOME": "/home/alice"])
                == "/home/alice/.config/mentoryd/mentoryd.json")
        // A relative XDG_CONFIG_HOME is invalid (XDG Base Directory) and ignored.
        #expect(
            alice.defaultConfigFile(environment: ["XDG_CONFIG_HOME": "config", "HOME": "/home/alice"])
                == "/home/alice/.config/mentoryd/mentoryd.json")
        let system = DaemonInstance(kind: .system, uid: 0, userName: "root")
        #expect(system.defaultConfigFile(environment: ["HOME": "/root"]) == "/etc/mentoryd/mentoryd.json")
    }

    @Test("session.status reports the kind, the uid and the account name")
    func wire() {
        let alice = DaemonInstance(kind: .user, uid: 1001, userName: "alice").wire
        #expect(alice.kind == .user && alice.uid == 1001 && alice.userName == "alice")
        let nameless = DaemonInstance(kind: .system, uid: 61_000, userName: nil).wire
        #expect(nameless.kind == .system && nameless.uid == 61_000 && nameless.userName.isEmpty)
    }
}
