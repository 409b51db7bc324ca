#if canImport(Glibc)
    import Glibc
#endif
import MentorySystemd
import MentoryTestSupport
import Testing

/// A datagram socket bound by the test, standing in for systemd's `NOTIFY_SOCKET`.
final class NotifySocketFixture {
    let address: String
    private let descriptor: Int32
    private let path: String?

    /// Binds a path socket in a fresh temporary directory, or an abstract one.
    init(abstract: Bool = false) throws {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(descriptor >= 0)
        self.descriptor = descriptor
        let name = "mentory-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes: [UInt8]
        if abstract {
            self.address = "@" + name
            self.path = nil
            bytes = [0] + Array(name.utf8)
        } else {
            var template = Array("\(TestTemporaryDirectory.path)/mentory-notify-XXXXXX".utf8CString)
            let directory = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
            let path = String(cString: directory) + "/notify"
            self.address = path
            self.path = path
            bytes = Array(path.utf8) + [0]
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        try #require(bound == 0, "bind failed: errno \(errno)")
    }

    deinit {
        close(self.descriptor)
        if let path {
            unlink(path)
            rmdir(String(path.dropLast("/notify".count)))
        }
    }

    /// The next datagram, or `nil` when none arrives within `timeout`.
    ///
    /// It polls without blocking and sleeps between tries, so it never holds a cooperative-pool
    /// thread that the services under test need: on a 2-core machine the pool has only two, and a
    /// blocking `recv` on both starves the very task that would send the datagram.
    func receive(timeout: Duration = .seconds(30)) async -> String? {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes {
                recv(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
            }
            if count >= 0 { return String(decoding: buffer.prefix(count), as: UTF8.self) }
            guard errno == EAGAIN || errno == EINTR, ContinuousClock.now < deadline else { return nil }
            guard (try? await Task.sleep(for: .milliseconds(5))) != nil else { return nil }
        }
    }

    /// Whether a datagram is waiting, without blocking.
    func hasPendingDatagram() -> Bool {
        var byte: UInt8 = 0
        return recv(self.descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) >= 0
    }
}

@Suite("SystemdNotifier")
struct NotifierTests {
    @Test("READY=1 and STATUS= travel together in one datagram")
    func readyWithStatus() async throws {
        let socket = try NotifySocketFixture()
        let notifier = SystemdNotifier(socketAddress: socket.address)
        try notifier.notify(.ready, .status("Serving 2 connections, 1 subscriber"))
        #expect(await socket.receive() == "READY=1\nSTATUS=Serving 2 connections, 1 subscriber")
    }

    @Test(
        "each state is encoded as sd_notify(3) expects",
        arguments: [
            (NotifyState.ready, "READY=1"),
            (NotifyState.stopping, "STOPPING=1"),
            (NotifyState.watchdog, "WATCHDOG=1"),
            (NotifyState.status("one\ntwo"), "STATUS=one two"),
            (NotifyState.reloading(monotonicMicroseconds: 42), "RELOADING=1\nMONOTONIC_USEC=42"),
        ])
    func encoding(state: NotifyState, expected: String) async throws {
        let socket = try NotifySocketFixture()
        try SystemdNotifier(socketAddress: socket.address).notify(state)
        #expect(await socket.receive() == expected)
    }

    @Test("RELOADING=1 is stamped with the current CLOCK_MONOTONIC time")
    func reloadingNow() async throws {
        let socket = try NotifySocketFixture()
        var before = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        try SystemdNotifier(socketAddress: socket.address).notify(.reloadingNow)
        var after = timespec()
        clock_gettime(CLOCK_MONOTONIC, &after)
        let message = try #require(await socket.receive())
        let lines = message.split(separator: "\n")
        #expect(lines.first == "RELOADING=1")
        let stamp = try #require(lines.last.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) })
        let low = UInt64(before.tv_sec) * 1_000_000 + UInt64(before.tv_nsec) / 1_000
        let high = UInt64(after.tv_sec) * 1_000_000 + UInt64(after.tv_nsec) / 1_000
        #expect((low...high).contains(stamp))
    }

    @Test("an abstract socket address (@name) works")
    func abstractAddress() async throws {
        let socket = try NotifySocketFixture(abstract: true)
        try SystemdNotifier(socketAddress: socket.address).notify(.watchdog)
        #expect(await socket.receive() == "WATCHDOG=1")
    }

    @Test("the socket comes from NOTIFY_SOCKET in the environment it is given")
    func fromEnvironment() async throws {
        let socket = try NotifySocketFixture()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.address])
        #expect(notifier.isEnabled)
        try notifier.notify(.stopping)
        #expect(await socket.receive() == "STOPPING=1")
    }

    @Test("without NOTIFY_SOCKET every notification is a no-op")
    func disabled() async throws {
        let notifier = SystemdNotifier(environment: [:])
        #expect(!notifier.isEnabled)
        try notifier.notify(.ready, .status("nobody listens"), .watchdog)
        try SystemdNotifier(socketAddress: "").notify(.stopping)
    }

    @Test("an address that is neither a path nor abstract is a typed error")
    func invalidAddress() {
        #expect(throws: SystemdNotifyError.invalidSocketAddress("relative/notify")) {
            try SystemdNotifier(socketAddress: "relative/notify").notify(.ready)
        }
        let tooLong = "/" + String(repeating: "x", count: 200)
        #expect(throws: SystemdNotifyError.invalidSocketAddress(tooLong)) {
            try SystemdNotifier(socketAddress: tooLong).notify(.ready)
        }
    }

    @Test("a socket nobody listens on is a send failure carrying errno")
    func missingSocket() {
        let path =
            "\(TestTemporaryDirectory.path)/mentory-notify-missing-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(throws: SystemdNotifyError.sendFailed(socket: path, errno: ENOENT)) {
            try SystemdNotifier(socketAddress: path).notify(.ready)
        }
    }

    @Test("an empty list of states sends nothing")
    func emptyNotification() async throws {
        let socket = try NotifySocketFixture()
        try SystemdNotifier(socketAddress: socket.address).notify([])
        #expect(!socket.hasPendingDatagram())
    }
}
