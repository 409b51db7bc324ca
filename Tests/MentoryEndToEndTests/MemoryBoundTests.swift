import Foundation
import Glibc
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import MentoryWireFixtures
import NIOCore
import Testing

/// A peer that writes without ever reading, and gives up on a write the daemon does not take within
/// two seconds (the daemon's back-pressure) instead of blocking.
func nonReadingPeer(_ daemon: DaemonProcess) throws -> RawConnection {
    try RawConnection(path: daemon.socketPath, sendTimeoutSeconds: 2)
}

/// Fills the diary with `count` entries whose texts are `textBytes` long (about 200 bytes an entry by default),
/// pipelining `diary.add` on 4 connections.
func fillDiary(_ daemon: DaemonProcess, count: Int, textBytes: Int = 140) async throws {
    let connections = 4
    let chunk = max(1, min(250, (1 << 20) / textBytes))
    try await withThrowingTaskGroup(of: Void.self) { group in
        for connection in 0..<connections {
            group.addTask {
                let raw = try RawConnection(path: daemon.socketPath, receiveTimeoutSeconds: 60)
                _ = try raw.hello()
                var add = Mentory_V1_DiaryAddRequest()
                add.emotion = .neutral
                add.text = String(repeating: "t", count: textBytes)
                var next = connection
                var id: UInt64 = 0
                while next < count {
                    var buffer = ByteBuffer()
                    var sent = 0
                    while sent < chunk, next < count {
                        add.recordDate = String(
                            format: "%04d-%02d-%02d", 1900 + next / 336, next / 28 % 12 + 1, next % 28 + 1)
                        add.title = "entry \(next)"
                        id += 1
                        buffer.writeFrame(requestEnvelope(id: id, "diary", "add", try add.serializedData()))
                        sent += 1
                        next += connections
                    }
                    raw.write(Array(buffer.readableBytesView))
                    for _ in 0..<sent {
                        if case .error(let error) = try raw.receive().response.result {
                            throw DaemonFailure(message: "diary.add failed: \(error)")
                        }
                    }
                }
            }
        }
        try await group.waitForAll()
    }
}

@Suite(
    "Memory bounds under peers that never read",
    .serialized,
    .timeLimit(.minutes(10)),
    .disabled(if: Sanitizers.threadSanitizerIsActive, "ThreadSanitizer's shadow memory multiplies resident memory")
)
struct MemoryBoundTests {
    static let entries = 50_000
    static let peakLimitKilobytes = 128 * 1024

    @Test("10,000 pipelined diary.list requests that are never read keep the daemon under 128 MiB")
    func pipelinedListsNeverRead() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"])
        defer { daemon.removeFiles() }
        let fillStarted = ContinuousClock.now
        try await fillDiary(daemon, count: Self.entries)
        print("filled the diary with \(Self.entries) entries in \(ContinuousClock.now - fillStarted)")
        let bystander = try await daemon.client("bystander")
        #expect(try await bystander.diaryList().count > 0)
        let afterFill = peakRSSKilobytes(of: daemon.pid)

        let hog = try nonReadingPeer(daemon)
        _ = hog.send([helloEnvelope(clientName: "never-reads")])
        var list = Mentory_V1_DiaryListRequest()
        list.limit = 500
        let body = try list.serializedData()
        let requests = (1...10_000).map { requestEnvelope(id: UInt64($0), "diary", "list", body) }
        let offered = requests.reduce(0) { total, request in
            var buffer = ByteBuffer()
            buffer.writeFrame(request)
            return total + buffer.readableBytes
        }
        let taken = hog.send(requests)
        try await waitUntil("the daemon stops reading the hog", timeout: .seconds(300)) {
            daemon.log.contains("outbound bound reached; no longer reading this connection")
        }
        try await bystander.ping()
        #expect(try await bystander.status().connections >= 2, "another client is served meanwhile")
        let peak = peakRSSKilobytes(of: daemon.pid)
        print(
            "pipelined diary.list, never read: the daemon took \(taken) of \(offered) request bytes;"
                + " peak RSS \(afterFill) KiB after the fill, \(peak) KiB after the flood"
        )
        #expect(peak > 0 && peak < Self.peakLimitKilobytes, "peak RSS \(peak) KiB")
        #expect(daemon.isRunning)
        await bystander.close()
        #expect(await daemon.stop() == 0, "shutdown does not wait forever on the peer that never reads")
        withExtendedLifetime(hog) {}
    }

    // The diary snapshot holds at most the newest 100 entries (PROTOCOL.md, "The diary snapshot"), so a
    // subscriber's queue is bounded by limits.subscriberQueueBytes however large the diary grows.
    @Test("8 diary subscribers that never read keep the daemon under 128 MiB")
    func subscribersNeverRead() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"])
        defer { daemon.removeFiles() }
        try await fillDiary(daemon, count: Self.entries)
        let bystander = try await daemon.client("bystander")
        let afterFill = peakRSSKilobytes(of: daemon.pid)

        var subscribe = Mentory_V1_SubscribeRequest()
        var topic = Mentory_V1_TopicSubscription()
        topic.topic = "diary"
        subscribe.topics = [topic]
        let body = try subscribe.serializedData()
        var subscribers: [RawConnection] = []
        for _ in 0..<8 {
            let peer = try nonReadingPeer(daemon)
            _ = peer.send([
                helloEnvelope(clientName: "never-reads"), requestEnvelope(id: 1, "session", "subscribe", body),
            ])
            subscribers.append(peer)
        }
        defer {
            let refused = daemon.log.split(separator: "\n").filter { $0.contains("event too large for a frame") }
            print(
                "8 diary subscribers: \(refused.count) events refused as too large; first: \(refused.first ?? "none")")
        }
        try await waitUntil("8 subscribers", timeout: .seconds(300)) { try await bystander.status().subscribers == 8 }
        var add = Mentory_V1_DiaryAddRequest()
        add.emotion = .pleasant
        add.text = String(repeating: "n", count: 2000)
        for index in 0..<2000 {
            // One entry per day: days after the filled range.
            add.recordDate = String(format: "%04d-%02d-%02d", 2100 + index / 336, index / 28 % 12 + 1, index % 28 + 1)
            add.title = "while nobody reads \(index)"
            _ = try await bystander.diaryAdd(add)
        }
        try await bystander.ping()
        let peak = peakRSSKilobytes(of: daemon.pid)
        print(
            "8 diary subscribers, never read: peak RSS \(afterFill) KiB after the fill, \(peak) KiB after 2,000 changes"
        )
        #expect(peak > 0 && peak < Self.peakLimitKilobytes, "peak RSS \(peak) KiB")
        #expect(daemon.isRunning)
        await bystander.close()
        #expect(await daemon.stop() == 0, "shutdown does not wait forever on subscribers that never read")
        withExtendedLifetime(subscribers) {}
    }
}
