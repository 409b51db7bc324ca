import Foundation
import Glibc
import MentoryTestSupport
import Testing

@testable import MentoryClient

/// A temporary directory tree for one test, removed at the end; traversable by every uid.
struct TrustSandbox: ~Copyable {
    let root: String

    init() throws {
        self.root = "\(TestTemporaryDirectory.path)/mentory-trust-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: self.root, withIntermediateDirectories: true)
        chmod(self.root, 0o755)
    }

    /// Creates `name` under the sandbox with `mode`, owned by `owner` when given.
    @discardableResult
    func directory(_ name: String, mode: mode_t, owner: uid_t? = nil) throws -> String {
        let path = self.root + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, mode)
        if let owner {
            #expect(chown(path, owner, gid_t(owner)) == 0, "chown \(path) (tests run as root)")
        }
        return path
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.root)
    }
}

@Suite("Socket trust rules")
struct SocketTrustRuleTests {
    let me = getuid()

    @Test("a private directory owned by the caller is trusted")
    func privateDirectory() throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("mine", mode: 0o700)
        #expect(SocketTrust.standard().directoryProblem(ofSocket: directory + "/mentoryd.sock") == nil)
        try SocketTrust.standard().checkDirectory(ofSocket: directory + "/mentoryd.sock")
    }

    @Test("a directory owned by someone untrusted is refused, naming the owner")
    func foreignOwner() throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("theirs", mode: 0o755)
        // Trust only root and a uid that is not the directory's owner.
        let trust = SocketTrust(trustedUIDs: self.me == 0 ? [4_000_000] : [0])
        let problem = try #require(trust.directoryProblem(ofSocket: directory + "/mentoryd.sock"))
        #expect(problem.contains(directory))
        #expect(problem.contains("is owned by uid \(self.me)"))
        #expect(throws: MentoryClientError.self) { try trust.checkDirectory(ofSocket: directory + "/x.sock") }
    }

    @Test("a group- or other-writable directory is refused, sticky or not", arguments: [0o770, 0o777, 0o1777])
    func writableDirectory(mode: Int) throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("shared", mode: mode_t(mode))
        let problem = try #require(SocketTrust.standard().directoryProblem(ofSocket: directory + "/mentoryd.sock"))
        #expect(problem.contains("has mode " + (mode < 0o1000 ? "0" : "") + String(mode, radix: 8)))
        #expect(problem.contains("group or others can write it"))
    }

    @Test("/tmp itself is never accepted as the socket's directory")
    func tmpItself() throws {
        let problem = try #require(SocketTrust.standard().directoryProblem(ofSocket: "/tmp/mentoryd.sock"))
        #expect(problem.contains("/tmp has mode 1777"))
    }

    @Test("an ancestor others can write without the sticky bit is refused; with it, accepted")
    func ancestors() throws {
        let sandbox = try TrustSandbox()
        try sandbox.directory("open", mode: 0o777)
        let inner = try sandbox.directory("open/private", mode: 0o700)
        let problem = try #require(SocketTrust.standard().directoryProblem(ofSocket: inner + "/mentoryd.sock"))
        #expect(problem.contains("\(sandbox.root)/open, above its directory, has mode 0777 without the sticky bit"))
        chmod(sandbox.root + "/open", 0o1777)
        #expect(SocketTrust.standard().directoryProblem(ofSocket: inner + "/mentoryd.sock") == nil)
    }

    @Test("symbolic links are resolved before the check")
    func symlinks() throws {
        let sandbox = try TrustSandbox()
        let open = try sandbox.directory("open", mode: 0o777)
        let link = sandbox.root + "/link"
        #expect(symlink(open, link) == 0)
        let problem = try #require(SocketTrust.standard().directoryProblem(ofSocket: link + "/mentoryd.sock"))
        #expect(problem.contains("its directory \(open) has mode 0777"))
    }

    @Test("the peer check names the uid and accepts only trusted ones")
    func peer() throws {
        let trust = SocketTrust(trustedUIDs: [0, 1000], daemonUser: "mentory")
        try trust.checkPeer(uid: 0, pid: 1, path: "/run/mentoryd/mentoryd.sock")
        try trust.checkPeer(uid: 1000, pid: 2, path: "/x.sock")
        do {
            try trust.checkPeer(uid: 65534, pid: 42, path: "/x.sock")
            Issue.record("uid 65534 was accepted")
        } catch {
            guard case .untrustedSocket(let path, let reason) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(path == "/x.sock")
            #expect(reason.contains("pid 42"))
            #expect(reason.contains("uid 65534"))
        }
    }

    @Test("MENTORY_DAEMON_USER names the daemon account, by name or uid")
    func daemonUser() throws {
        #expect(SocketTrust.standard(daemonUser: "4000001").trustedUIDs.contains(4_000_001))
        let nobody = try #require(SocketTrust.uid(ofUser: "nobody"))
        #expect(SocketTrust.standard(daemonUser: "nobody").trustedUIDs.contains(nobody))
        #expect(SocketTrust.standard(daemonUser: "no-such-user-here").trustedUIDs == [0, getuid(), geteuid()])
        #expect(SocketTrust.standard().trustedUIDs.isSuperset(of: [0, getuid()]))
    }

    @Test(
        "the caller's own sockets are tried first (its user instance, then its daemon in /tmp), the system socket last")
    func candidateOrder() {
        let candidates = SocketLocator.candidates(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000)
        #expect(
            candidates == [
                "/run/user/1000/mentoryd/mentoryd.sock", "/tmp/mentoryd-1000/mentoryd.sock",
                "/run/mentoryd/mentoryd.sock",
            ])
        #expect(
            SocketLocator.candidates(environment: [:], uid: 1000).first == "/run/user/1000/mentoryd/mentoryd.sock",
            "without XDG_RUNTIME_DIR (su, sudo -u) the user instance's socket is still the first tried")
        #expect(SocketLocator.candidates(environment: [:], uid: 0) == ["/run/mentoryd/mentoryd.sock"])
    }

    @Test("a person with mentoryd.socket enabled has a user instance; masking it, a system uid or no link has none")
    func userInstanceDetection() throws {
        let root = TestTemporaryDirectory.path + "/user-instance-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = "/home/alice"
        let environment = ["HOME": home]
        #expect(!UserInstance.isEnabled(uid: 1001, environment: environment, root: root), "nothing installed")
        let global = root + "/etc/systemd/user/sockets.target.wants"
        try FileManager.default.createDirectory(atPath: global, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: global + "/mentoryd.socket", withDestinationPath: "/etc/systemd/user/mentoryd.socket")
        #expect(UserInstance.isEnabled(uid: 1001, environment: environment, root: root), "enabled for every user")
        #expect(!UserInstance.isEnabled(uid: 999, environment: environment, root: root), "a system account")
        #expect(!UserInstance.isEnabled(uid: 0, environment: environment, root: root), "root")
        #expect(!UserInstance.isEnabled(uid: 65534, environment: environment, root: root), "nobody")
        let own = root + home + "/.config/systemd/user"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: own + "/mentoryd.socket", withDestinationPath: "/dev/null")
        #expect(!UserInstance.isEnabled(uid: 1001, environment: environment, root: root), "masked: opted out")
        try FileManager.default.removeItem(atPath: global + "/mentoryd.socket")
        try FileManager.default.removeItem(atPath: own + "/mentoryd.socket")
        try FileManager.default.createDirectory(
            atPath: own + "/sockets.target.wants", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: own + "/sockets.target.wants/mentoryd.socket", withDestinationPath: "/x/mentoryd.socket")
        #expect(UserInstance.isEnabled(uid: 1001, environment: environment, root: root), "enabled for alice alone")
        #expect(
            UserInstance.isEnabled(
                uid: 1001, environment: ["HOME": "/elsewhere", "XDG_CONFIG_HOME": root + home + "/.config"],
                root: ""),
            "XDG_CONFIG_HOME names the folder")
        let reason = UserInstance.notRunningReason(tried: ["/run/user/1001/mentoryd/mentoryd.sock"])
        #expect(reason.contains("systemctl --user start mentoryd.socket"))
        #expect(reason.contains("loginctl enable-linger"))
        #expect(reason.contains("/run/user/1001/mentoryd/mentoryd.sock"))
    }

    @Test("the search skips an untrusted socket, and refuses when nothing trusted exists")
    func search() throws {
        let sandbox = try TrustSandbox()
        let squatted = try sandbox.directory("squatted", mode: 0o777) + "/mentoryd.sock"
        let good = try sandbox.directory("good", mode: 0o700) + "/mentoryd.sock"
        let missing = sandbox.root + "/missing/mentoryd.sock"
        #expect(FileManager.default.createFile(atPath: squatted, contents: nil))
        let trust = SocketTrust.standard()
        #expect(FileManager.default.createFile(atPath: good, contents: nil))
        #expect(try SocketLocator.firstTrusted(in: [missing, squatted, good], trust: trust) == good)
        #expect(try SocketLocator.firstTrusted(in: [missing], trust: trust) == missing)
        do {
            _ = try SocketLocator.firstTrusted(in: [missing, squatted], trust: trust)
            // `missing` does not exist and `squatted` is untrusted: only the untrusted one exists.
            Issue.record("an untrusted socket was chosen")
        } catch {
            guard case .untrustedSocket(let path, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(path == squatted)
        }
        // A socket the caller may not connect to (no write permission) is passed over while another is
        // usable, and chosen when none is, so that the connection failure says why. Root may write anything.
        if getuid() != 0 {
            let forbidden = try sandbox.directory("forbidden", mode: 0o700) + "/mentoryd.sock"
            #expect(
                FileManager.default.createFile(atPath: forbidden, contents: nil, attributes: [.posixPermissions: 0o400])
            )
            #expect(try SocketLocator.firstTrusted(in: [missing, forbidden, good], trust: trust) == good)
            #expect(try SocketLocator.firstTrusted(in: [missing, forbidden], trust: trust) == forbidden)
        }
        #expect(try SocketLocator.locate(explicit: "/x.sock", environment: ["MENTORY_SOCKET": "/y.sock"]) == "/x.sock")
        #expect(try SocketLocator.locate(environment: ["MENTORY_SOCKET": "/y.sock"]) == "/y.sock")
    }

    @Test("reconnect back-off starts at 1 s at least, grows, jitters up to 25% and is capped")
    func backoff() {
        let policy = ReconnectPolicy()
        #expect(policy.delay(forAttempt: 0, jitter: 0) == .seconds(1))
        #expect(policy.delay(forAttempt: 0, jitter: 0.25) == .milliseconds(1250))
        #expect(policy.delay(forAttempt: 3, jitter: 0) == .seconds(8))
        #expect(policy.delay(forAttempt: 50, jitter: 0.25) == .seconds(30))
        for attempt in 0..<10 {
            let delay = policy.delay(forAttempt: attempt)
            #expect(delay >= .seconds(1) && delay <= .seconds(30))
        }
        #expect(ReconnectPolicy(initialDelay: .milliseconds(1)).initialDelay == .seconds(1))
    }

    @Test("after a working connection is lost, retries come every quarter second for the quick window, then back off")
    func quickRetries() {
        var policy = ReconnectPolicy()
        #expect(policy.delay(forAttempt: 0, sinceLoss: .seconds(1), jitter: 0) == .milliseconds(250))
        #expect(policy.delay(forAttempt: 0, sinceLoss: .seconds(29), jitter: 0.25) == .nanoseconds(312_500_000))
        // Never connected: the back-off; past the window: the back-off from its first delay.
        #expect(policy.delay(forAttempt: 0, sinceLoss: nil, jitter: 0) == .seconds(1))
        #expect(policy.delay(forAttempt: 0, sinceLoss: .seconds(30), jitter: 0) == .seconds(1))
        #expect(policy.delay(forAttempt: 2, sinceLoss: .seconds(31), jitter: 0) == .seconds(4))
        #expect(policy.isQuickRetry(sinceLoss: .zero) && !policy.isQuickRetry(sinceLoss: nil))
        policy.quickRetryWindow = .zero
        #expect(policy.delay(forAttempt: 0, sinceLoss: .zero, jitter: 0) == .seconds(1))
        policy.quickRetryInterval = .milliseconds(1)
        #expect(policy.quickRetryInterval == ReconnectPolicy.minimumQuickRetryInterval)
    }
}
