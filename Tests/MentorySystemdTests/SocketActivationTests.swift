import Foundation
import MentorySystemd
import MentoryTestSupport
import MentoryWire
import NIOCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

private let socketActivate = "/usr/bin/systemd-socket-activate"

struct ActivationTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A temporary directory with an empty config file, removed at the end.
final class ActivationFixture {
    let directory: String

    init() throws {
        var template = Array("\(TestTemporaryDirectory.path)/mentory-activation-XXXXXX".utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw ActivationTestError("mkdtemp failed: errno \(errno)")
        }
        self.directory = String(cString: created)
        try "{}".write(toFile: self.configPath, atomically: true, encoding: .utf8)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    var socketPath: String { self.directory + "/mentoryd.sock" }
    var configPath: String { self.directory + "/mentoryd.json" }

    /// `systemd-socket-activate` listening on ``socketPath``, set to exec mentoryd on first traffic.
    func launch(datagram: Bool = false) async throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: socketActivate)
        process.arguments =
            (datagram ? ["--datagram"] : []) + [
                "--listen=\(self.socketPath)",
                "-E", "MENTORYD_STORAGE_BACKEND=memory",
                "-E", "MENTORYD_LOG_LEVEL=warning",
                try ProductBinaries.path(of: "mentoryd"),
                "--config", self.configPath,
                "--state-dir", self.directory + "/state",
            ]
        process.standardOutput = FileHandle.nullDevice
        // systemd-socket-activate says "Listening on" once it has called listen(2). The socket file
        // exists from bind(2) on, so a connect between the two is refused: wait for the line.
        let logPath = self.directory + "/socket-activate.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try await process.runTiedToTestProcess()
        try await waitUntil("systemd-socket-activate listens on \(self.socketPath)") {
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            return log.contains("Listening on \(self.socketPath)")
        }
        return process
    }
}

/// Waits for `process` to exit, killing it after `seconds`, and returns its exit status.
func waitForExit(_ process: Process, seconds: Double = 60) async throws -> Int32 {
    do {
        try await waitUntil("the process exits", timeout: .milliseconds(Int(seconds * 1000))) { !process.isRunning }
    } catch {
        kill(process.processIdentifier, SIGKILL)
        _ = await process.waitForExit()
        throw error
    }
    return await process.waitForExit()
}

/// A blocking Unix stream socket speaking length-prefixed frames.
final class RawConnection {
    private let descriptor: Int32

    init(path: String, type: Int32 = Int32(SOCK_STREAM.rawValue)) throws {
        self.descriptor = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.descriptor >= 0 else { throw ActivationTestError("socket failed: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(self.descriptor)
            throw ActivationTestError("connect to \(path) failed: errno \(code)")
        }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(self.descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(self.descriptor) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(self.descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { throw ActivationTestError("write failed: errno \(errno)") }
            offset += written
        }
    }

    func send(_ envelope: Mentory_V1_Envelope) throws {
        var buffer = ByteBuffer()
        buffer.writeFrame(envelope)
        try self.send(Array(buffer.readableBytesView))
    }

    func receiveEnvelope() throws -> Mentory_V1_Envelope {
        let header = try self.receive(count: 4)
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        return try Mentory_V1_Envelope(frame: ByteBuffer(bytes: try self.receive(count: length)))
    }

    private func receive(count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes[offset...].withUnsafeMutableBytes { read(self.descriptor, $0.baseAddress, $0.count) }
            guard got > 0 else { throw ActivationTestError("read failed or the daemon closed (errno \(errno))") }
            offset += got
        }
        return bytes
    }
}

@Suite("Socket activation of the real mentoryd through systemd-socket-activate", .serialized, .timeLimit(.minutes(10)))
struct SocketActivationTests {
    @Test(
        "mentoryd adopts the passed socket, answers a handshake, exits 0 on SIGTERM and leaves the socket",
        .enabled(if: FileManager.default.isExecutableFile(atPath: socketActivate))
    )
    func adoptsActivatedSocket() async throws {
        let fixture = try ActivationFixture()
        let process = try await fixture.launch()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // The first connection makes systemd-socket-activate exec mentoryd with the listening fd.
        let connection = try RawConnection(path: fixture.socketPath)
        var hello = Mentory_V1_Hello()
        hello.protocolVersion = WireProtocol.version
        hello.clientName = "MentorySystemdTests"
        var envelope = Mentory_V1_Envelope()
        envelope.hello = hello
        try connection.send(envelope)
        let reply = try connection.receiveEnvelope()
        guard case .welcome(let welcome) = reply.kind else {
            Issue.record("expected a Welcome, got \(reply)")
            return
        }
        #expect(welcome.protocolVersion == WireProtocol.version)
        #expect(!welcome.serverVersion.isEmpty)
        #expect(welcome.handlers.map(\.namespace).contains("session"))
        #expect(!welcome.handlers.map(\.namespace).contains("debug"), "fault injection is off by default")

        // systemd-socket-activate execs mentoryd in its own process: SIGTERM goes to mentoryd.
        kill(process.processIdentifier, SIGTERM)
        #expect(try await waitForExit(process) == 0)
        var info = stat()
        #expect(lstat(fixture.socketPath, &info) == 0, "an activated socket is never unlinked")
    }

    @Test(
        "a passed socket that is not a Unix stream socket stops mentoryd with exit status 66",
        .enabled(if: FileManager.default.isExecutableFile(atPath: socketActivate))
    )
    func rejectsDatagramSocket() async throws {
        let fixture = try ActivationFixture()
        let process = try await fixture.launch(datagram: true)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // A datagram socket is handed over on its first datagram.
        let connection = try RawConnection(path: fixture.socketPath, type: Int32(SOCK_DGRAM.rawValue))
        try connection.send([0])
        #expect(try await waitForExit(process) == SocketActivationError.exitStatus)
    }
}

@Suite("SocketActivationError")
struct SocketActivationErrorTests {
    @Test("errors say what to fix")
    func messages() {
        let error = SocketActivationError.notAUnixStreamSocket(descriptor: 3, name: "mentoryd.socket")
        #expect(error.description.contains("ListenStream="))
        #expect(error.description.contains("fd 3"))
        #expect(SocketActivationError.exitStatus == 66)
    }

    @Test("without LISTEN_FDS there is nothing to adopt")
    func notActivated() throws {
        // The test process was not socket-activated (swift test does not set LISTEN_PID to us).
        #expect(try SocketActivation.unixStreamListener() == nil)
    }
}
