import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import Testing

@Suite("End to end through the client library", .serialized, .timeLimit(.minutes(10)))
struct ClientLibraryEndToEndTests {
    @Test("a subscriber sees mentor, reachability and diary events in order")
    func eventsInOrder() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let subscriber = try await daemon.client("subscriber")
        let writer = try await daemon.client("writer")
        _ = try await subscriber.subscribe(topics: [WireNames.mentor, WireNames.reachability, WireNames.diary])

        var mentor = Mentory_V1_MentorSetRequest()
        mentor.content = "Take a walk."
        mentor.character = .cool
        _ = try await writer.mentorSet(mentor)
        var peer = Mentory_V1_PeerState()
        peer.peer = "watch"
        peer.isPaired = true
        peer.isReachable = true
        _ = try await writer.reachabilityReport(peer)
        var entry = Mentory_V1_DiaryAddRequest()
        entry.recordDate = "2026-11-21"
        entry.title = "Saturday"
        entry.text = "Quiet."
        entry.emotion = .slightlyPleasant
        let added = try await writer.diaryAdd(entry)

        var received: [Mentory_V1_Event] = []
        for await event in subscriber.events {
            received.append(event)
            if received.count == 6 { break }
        }
        #expect(received.map(\.kind) == [.snapshot, .snapshot, .snapshot, .change, .change, .change])
        #expect(
            received.map(\.topic) == [
                WireNames.mentor, WireNames.reachability, WireNames.diary, WireNames.mentor, WireNames.reachability,
                WireNames.diary,
            ])
        #expect(received.suffix(3).map(\.sequence) == [1, 1, 1])
        #expect(try Mentory_V1_MentorState(serializedBytes: received[3].body).message.content == "Take a walk.")
        #expect(try Mentory_V1_PeerState(serializedBytes: received[4].body).peer == "watch")
        #expect(try Mentory_V1_DiaryChange(serializedBytes: received[5].body).added == added)
        await subscriber.close()
        await writer.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("a peer flips to unreachable when its connection closes")
    func reachabilityFlipsOnDisconnect() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let observer = try await daemon.client("observer")
        let phone = try await daemon.client("phone")
        var peer = Mentory_V1_PeerState()
        peer.peer = "phone"
        peer.isPaired = true
        peer.isAppInstalled = true
        peer.isReachable = true
        _ = try await phone.reachabilityReport(peer)
        _ = try await observer.subscribe(topics: [WireNames.reachability])
        var iterator = observer.events.makeAsyncIterator()
        let snapshot = try #require(await iterator.next())
        #expect(try Mentory_V1_ReachabilitySnapshot(serializedBytes: snapshot.body).peers.first?.isReachable == true)
        await phone.close()
        let change = try #require(await iterator.next())
        let flipped = try Mentory_V1_PeerState(serializedBytes: change.body)
        #expect(flipped.peer == "phone")
        #expect(!flipped.isReachable)
        #expect(try await observer.reachabilityGet().peers.first?.isReachable == false)
        await observer.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("a call on a connection the daemon has closed fails at once, even without a timeout")
    func callAfterTheDaemonClosedFails() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let client = try await MentoryClient.connect(
            socketPath: daemon.socketPath, clientName: "late", defaultTimeout: nil)
        try await client.ping()
        #expect(await daemon.stop() == 0)
        let deadline = ContinuousClock.now + .seconds(10)
        while client.isConnected, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!client.isConnected)
        // The handler that answers calls is gone with the channel; the call must still end.
        await #expect(throws: MentoryClientError.self) { try await client.ping() }
        await #expect(throws: MentoryClientError.self) {
            try await MentoryClient.connect(socketPath: daemon.socketPath, clientName: "after", defaultTimeout: nil)
        }
    }

    @Test("many pipelined requests on one connection are each answered correctly")
    func pipelining() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let client = try await daemon.client()
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for day in 1...28 {
                group.addTask {
                    var request = Mentory_V1_DiaryAddRequest()
                    request.recordDate = "2026-02-\(day < 10 ? "0" : "")\(day)"
                    request.title = "day \(day)"
                    request.text = "text \(day)"
                    request.emotion = .neutral
                    let entry = try await client.diaryAdd(request)
                    return (day, entry.title)
                }
            }
            for try await (day, title) in group {
                #expect(title == "day \(day)")
            }
        }
        #expect(try await client.diaryList(limit: 100).count == 28)
        await client.close()
        await daemon.stop()
    }

    @Test("garbage is answered with an error while other clients keep working")
    func garbageFrame() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let bystander = try await daemon.client("bystander")
        let raw = try RawConnection(path: daemon.socketPath)
        #expect(try raw.hello().welcome.protocolVersion == WireProtocol.version)

        // Valid framing, invalid protobuf: an error, and the connection stays usable.
        raw.write([0, 0, 0, 3, 0xFF, 0xFF, 0xFF])
        let notice = try raw.receive().connectionError
        #expect(notice.error.code == UInt32(Mentory_V1_ErrorCode.malformedMessage.rawValue))
        #expect(!notice.closing)
        try await bystander.ping()
        var request = Mentory_V1_Request()
        request.id = 9
        request.namespace = "session"
        request.method = "ping"
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        raw.send(envelope)
        #expect(try raw.receive().response.id == 9)

        // An oversized length prefix: a closing error, then the connection ends.
        raw.write([0xFF, 0xFF, 0xFF, 0xFF])
        let fatal = try raw.receive().connectionError
        #expect(fatal.error.code == UInt32(Mentory_V1_ErrorCode.frameTooLarge.rawValue))
        #expect(fatal.closing)
        #expect(raw.isClosedByPeer())
        try await bystander.ping()
        await bystander.close()
        #expect(await daemon.stop() == 0)
    }

    @Test("requests before the handshake and unsupported versions get clear errors")
    func handshakeRules() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let early = try RawConnection(path: daemon.socketPath)
        var request = Mentory_V1_Request()
        request.id = 1
        request.namespace = "session"
        request.method = "ping"
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        early.send(envelope)
        #expect(try early.receive().response.error.code == UInt32(Mentory_V1_ErrorCode.handshakeRequired.rawValue))

        let future = try RawConnection(path: daemon.socketPath)
        let refusal = try future.hello(version: 99).connectionError
        #expect(refusal.error.code == UInt32(Mentory_V1_ErrorCode.unsupportedVersion.rawValue))
        #expect(refusal.error.message.contains("99"))
        #expect(future.isClosedByPeer())
        await daemon.stop()
    }

    @Test("the socket is created 0660, a stale one is replaced, and it is removed on exit")
    func socketFileLifecycle() async throws {
        let first = try await DaemonProcess()
        defer { first.removeFiles() }
        let attributes = try FileManager.default.attributesOfItem(atPath: first.socketPath)
        #expect((attributes[.posixPermissions] as? Int) == 0o660)
        // A second daemon on the same live socket refuses to steal it.
        let second = Process()
        second.executableURL = DaemonProcess.binary("mentoryd")
        // Its own state directory: without one, a daemon run as root would open /var/lib/mentoryd.
        second.arguments = ["--socket", first.socketPath, "--state-dir", first.directory + "/second-state"]
        second.standardError = FileHandle.nullDevice
        try await second.runTiedToTestProcess()
        #expect(await second.waitForExit() != 0)
        // After SIGKILL the socket file is stale; a new daemon replaces it.
        kill(first.pid, SIGKILL)
        while first.isRunning { try await Task.sleep(for: .milliseconds(10)) }
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        let restarted = try await DaemonProcess(socketPath: first.socketPath)
        defer { restarted.removeFiles() }
        try await restarted.client().ping()
        #expect(await restarted.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: first.socketPath), "the socket is unlinked on exit")
    }
}
