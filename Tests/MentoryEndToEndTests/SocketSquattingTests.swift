import Foundation
import Glibc
import MentoryClient
import MentoryTestSupport
import Testing

/// A `mentoryd` run as another uid through `setpriv`, in a directory that uid owns.
final class ForeignDaemon: Sendable {
    let socketPath: String
    let directory: String
    let logPath: String
    private let process: Process

    /// Starts the daemon as `uid` in `directory` (which `uid` must own) and waits until it accepts.
    init(uid: uid_t, directory: String) async throws {
        self.directory = directory
        self.socketPath = directory + "/mentoryd.sock"
        self.logPath = directory + ".log"
        _ = FileManager.default.createFile(atPath: self.logPath, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // Changing the uid clears the parent-death signal that runTiedToTestProcess sets, so this
        // setpriv sets it again, after the change, for the daemon it execs.
        process.arguments = [
            "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--pdeathsig", "KILL",
            try ProductBinaries.path(of: "mentoryd"),
            "--socket", self.socketPath, "--state-dir", directory + "/state",
        ]
        var environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("MENTORYD_") && $0.key != "NOTIFY_SOCKET"
        }
        environment["MENTORYD_SOCKET_MODE"] = "0666"
        // Run as that user, it is a user instance, which reads its configuration from the user's home: this one
        // (the test's own home, e.g. /root, is closed to it).
        environment["HOME"] = directory
        environment.removeValue(forKey: "XDG_CONFIG_HOME")
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: self.logPath))
        try await process.runTiedToTestProcess()
        self.process = process
        // The test's own trust does not include `uid`: probe with one that does.
        let probeTrust = SocketTrust(trustedUIDs: [0, getuid(), uid])
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline, process.isRunning {
            if let client = try? await MentoryClient.connect(
                socketPath: self.socketPath, clientName: "probe", trust: probeTrust)
            {
                await client.close()
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        await self.stop()
        let log = (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
        throw DaemonFailure(message: "mentoryd as uid \(uid) did not start; its log:\n" + log)
    }

    /// SIGTERM, then SIGKILL if it has not exited within the deadline.
    func stop() async {
        if self.process.isRunning { kill(self.process.processIdentifier, SIGTERM) }
        let deadline = ContinuousClock.now + .seconds(60)
        while self.process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            _ = await self.process.waitForExit()
        }
    }
}

/// Runs the real `mentoryctl` as `uid` (through `setpriv`) with no MENTORY_SOCKET.
func ctl(as uid: uid_t?, _ arguments: [String], environment: [String] = []) async throws -> CommandResult {
    var command = ["-u", "MENTORY_SOCKET", "-u", "MENTORY_DAEMON_USER"] + environment
    if let uid {
        command += ["setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--pdeathsig", "KILL"]
    }
    command += [try ProductBinaries.path(of: "mentoryctl")] + arguments
    return try await CommandResult.run(URL(fileURLWithPath: "/usr/bin/env"), command, environment: [:])
}

@Suite("Socket squatting: mentoryctl talks only to trusted sockets", .serialized, .timeLimit(.minutes(5)))
struct SocketSquattingTests {
    static let squatter: uid_t = 65534
    static let victim: uid_t = 65533

    @Test("a daemon another user runs in a directory they own is refused, by directory and by peer uid")
    func squatter() async throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("squat", mode: 0o755, owner: Self.squatter)
        let daemon = try await ForeignDaemon(uid: Self.squatter, directory: directory)
        defer { Task { await daemon.stop() } }

        // The victim's diary entry must not reach the squatter: refused on the directory's owner.
        let byDirectory = try await ctl(
            as: Self.victim,
            ["diary", "add", "--emotion", "neutral", "--title", "secret", "--text", "x", "--socket", daemon.socketPath]
        )
        #expect(byDirectory.status == 69, "\(byDirectory.stderr)")
        #expect(byDirectory.stderr.contains("refusing the socket \(daemon.socketPath)"))
        #expect(byDirectory.stderr.contains("its directory \(directory) is owned by uid 65534"))

        // The same daemon's socket moved under a root-owned directory: the peer uid gives it away.
        #expect(chown(directory, 0, 0) == 0)
        let byPeer = try await ctl(as: Self.victim, ["--socket", daemon.socketPath, "ping"])
        #expect(byPeer.status == 69, "\(byPeer.stderr)")
        #expect(byPeer.stderr.contains("runs as uid 65534"))
        #expect(!byPeer.stderr.contains("pong"))

        // The client library refuses it the same way, for root as for anyone.
        await #expect(throws: MentoryClientError.self) {
            try await MentoryClient.connect(socketPath: daemon.socketPath, clientName: "tests")
        }
        let log = (try? String(contentsOfFile: daemon.logPath, encoding: .utf8)) ?? ""
        #expect(!log.contains("diary.add"), "nothing was sent to the squatter")

        // The squatter's own uid may use its daemon: the caller is trusted.
        #expect(chown(directory, Self.squatter, gid_t(Self.squatter)) == 0)
        let own = try await ctl(as: Self.squatter, ["ping", "--socket", daemon.socketPath])
        #expect(own.status == 0, "\(own.stderr)")
        await daemon.stop()
    }

    @Test("a socket in a directory group or others can write is refused, and accepted once it is private")
    func writableDirectory() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_SOCKET_MODE": "0666"])
        defer { daemon.removeFiles() }
        chmod(daemon.directory, 0o1777)
        let refused = try await ctl(as: Self.victim, ["--socket", daemon.socketPath, "--json", "ping"])
        #expect(refused.status == 69, "\(refused.stderr)")
        #expect(refused.stderr.contains("its directory \(daemon.directory) has mode 1777"))
        chmod(daemon.directory, 0o775)
        let groupWritable = try await ctl(as: nil, ["ping", "--socket", daemon.socketPath])
        #expect(groupWritable.status == 69)
        #expect(groupWritable.stderr.contains("has mode 0775"))

        // A root daemon in a root-owned private directory is trusted by every caller.
        chmod(daemon.directory, 0o755)
        let asOther = try await ctl(as: Self.victim, ["--socket", daemon.socketPath, "ping"])
        #expect(asOther.status == 0, "\(asOther.stderr)")
        let asRoot = try await ctl(as: nil, ["ping", "--socket", daemon.socketPath])
        #expect(asRoot.status == 0, "\(asRoot.stderr)")
        await daemon.stop()
    }

    @Test("MENTORY_DAEMON_USER makes the daemon user trusted")
    func daemonUser() async throws {
        let sandbox = try TrustSandbox()
        let directory = try sandbox.directory("service", mode: 0o755, owner: Self.squatter)
        let daemon = try await ForeignDaemon(uid: Self.squatter, directory: directory)
        defer { Task { await daemon.stop() } }
        let trusted = try await ctl(
            as: Self.victim, ["--socket", daemon.socketPath, "ping"], environment: ["MENTORY_DAEMON_USER=65534"])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        await daemon.stop()
    }
}

@Suite("Global options before the subcommand", .serialized, .timeLimit(.minutes(5)))
struct GlobalOptionTests {
    @Test("--socket, --json and --timeout work before and after the subcommand")
    func placement() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let socket = daemon.socketPath
        for arguments in [
            ["--socket", socket, "ping"],
            ["--socket", socket, "--json", "ping"],
            ["--json", "--socket=\(socket)", "--timeout", "10", "status"],
            ["--json", "status", "--socket", socket],
            ["status", "--socket", socket, "--json"],
            ["--socket", socket, "--json", "diary", "list"],
        ] {
            let result = try await ctl(as: nil, arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            if arguments.contains("--json") {
                #expect((try? result.json()) != nil, "\(arguments) prints JSON: \(result.stdout)")
            }
        }
        // Moved options go before a `--`, after which words are arguments: here an entry id.
        let terminated = try await ctl(as: nil, ["--socket", socket, "--json", "diary", "get", "--", "--no-such-id"])
        #expect(terminated.status == 1, "the daemon answered (not a usage error): \(terminated.stderr)")
        #expect(terminated.stderr.contains("--no-such-id"), "\(terminated.stderr)")
        let missing = try await ctl(as: nil, ["--socket", daemon.directory + "/nothing.sock", "ping"])
        #expect(missing.status == 69)
        #expect(missing.stderr.contains("nothing.sock"))
        await daemon.stop()
    }
}
