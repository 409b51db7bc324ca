import Foundation
import Glibc
import MentoryClient
import MentoryTestSupport
import MentoryWire
import MentoryWireFixtures
import NIOCore
import Testing

private func frameBytes(_ envelope: Mentory_V1_Envelope) -> [UInt8] {
    var buffer = ByteBuffer()
    buffer.writeFrame(envelope)
    return Array(buffer.readableBytesView)
}

@Suite("Transport limits on a real daemon", .serialized, .timeLimit(.minutes(5)))
struct TransportLimitTests {
    @Test("a peer that shuts down its writing half mid-frame receives TRUNCATED_FRAME before the close")
    func truncatedFrameReachesThePeer() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"])
        defer { daemon.removeFiles() }
        let raw = try RawConnection(path: daemon.socketPath)
        _ = try raw.hello()
        let frame = frameBytes(requestEnvelope(id: 1, "session", "ping"))
        raw.write(Array(frame.prefix(frame.count - 2)))
        raw.shutdownWrite()
        let error = try raw.receive().connectionError
        #expect(error.error.code == UInt32(Mentory_V1_ErrorCode.truncatedFrame.rawValue))
        #expect(error.closing)
        #expect(raw.isClosedByPeer())
        #expect(await daemon.stop() == 0)
    }

    @Test("EOF at a frame boundary just closes")
    func cleanEOFCloses() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"])
        defer { daemon.removeFiles() }
        let raw = try RawConnection(path: daemon.socketPath)
        _ = try raw.hello()
        raw.shutdownWrite()
        #expect(raw.isClosedByPeer())
        let client = try await daemon.client()
        // The half-closed connection is gone; the start-up probe's close may still be on its way, as in
        // ClientLifetimeTests.
        #expect(
            try await eventually { try await client.status().connections == 1 }, "the half-closed connection is gone")
        await client.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("access rules see supplementary groups read with SO_PEERGROUPS")
    func supplementaryGroups() async throws {
        let daemon = try await DaemonProcess(environment: [
            "MENTORYD_STORAGE_BACKEND": "memory", "MENTORYD_SOCKET_MODE": "0666",
            "MENTORYD_ACCESS_RULES": "deny gid=4242 diary.list",
        ])
        defer { daemon.removeFiles() }
        func list(groups: [String]) async throws -> CommandResult {
            try await CommandResult.run(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["setpriv", "--reuid=65534", "--regid=65534"] + groups + [
                    DaemonProcess.binary("mentoryctl").path, "diary", "list", "--socket", daemon.socketPath,
                ],
                environment: [:]
            )
        }
        let member = try await list(groups: ["--groups=100,4242"])
        #expect(member.status == 1 && member.stderr.contains("permission denied"), "\(member.stderr)")
        let outsider = try await list(groups: ["--groups=100"])
        #expect(outsider.status == 0, "\(outsider.stderr)")
        let none = try await list(groups: ["--clear-groups"])
        #expect(none.status == 0, "\(none.stderr)")
        #expect(await daemon.stop() == 0)
    }

    @Test("shutdown closes a peer that never reads after limits.shutdownDrainSeconds")
    func shutdownDeadline() async throws {
        let daemon = try await DaemonProcess(environment: [
            "MENTORYD_STORAGE_BACKEND": "memory", "MENTORYD_LIMITS_SHUTDOWN_DRAIN_SECONDS": "1",
        ])
        defer { daemon.removeFiles() }
        // 50,000 pings: about 1 MB of replies that are never read, more than the socket buffers hold, so
        // the closing SHUTTING_DOWN error queued behind them can never be written. Encoded before the
        // connection opens, so that its Hello arrives well within the handshake timeout.
        let pings = (1...50_000).map { requestEnvelope(id: UInt64($0), "session", "ping") }
        let frames = RawConnection.frames([helloEnvelope(clientName: "never-reads")] + pings)
        let peer = try nonReadingPeer(daemon)
        _ = peer.send(frames: frames)
        let client = try await daemon.client()
        try await client.ping()
        await client.close()
        #expect(await daemon.stop() == 0, "the daemon exits although the peer never reads")
        #expect(daemon.log.contains("closed a connection that did not take its last frames in time"))
        withExtendedLifetime(peer) {}
    }
}
