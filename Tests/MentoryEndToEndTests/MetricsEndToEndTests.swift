import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import SwiftProtobuf
import Testing

@Suite("Metrics end to end", .serialized, .timeLimit(.minutes(5)))
struct MetricsEndToEndTests {
    /// The value of the sample of family `name` whose labels are exactly `labels`, if any.
    static func value(_ reply: Mentory_V1_MetricsReply, _ name: String, _ labels: [String: String] = [:]) -> Double? {
        reply.families.first { $0.name == name }?.samples.first { sample in
            Dictionary(uniqueKeysWithValues: sample.labels.map { ($0.name, $0.value) }) == labels
        }?.value
    }

    @Test("mentoryctl metrics counts known requests, and --prometheus output parses")
    func countsAndFormats() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let pings = 7
        let client = try await daemon.client()
        for _ in 0..<pings { try await client.ping() }
        await #expect(throws: MentoryClientError.self) { _ = try await client.diaryGet(id: "no-such-entry") }
        _ = try await client.diaryAdd(Self.entry())
        await client.close()

        let json = try await daemon.ctl(["metrics", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        #expect(json.stdout.split(separator: "\n").count == 1, "one JSON object on one line")
        let reply = try Mentory_V1_MetricsReply(jsonString: json.stdout)
        let requests = "mentoryd_requests_total"
        let ping = Self.value(reply, requests, ["namespace": "session", "method": "ping", "code": "OK"]) ?? 0
        #expect(ping >= Double(pings))
        #expect(Self.value(reply, requests, ["namespace": "diary", "method": "get", "code": "NOT_FOUND"]) == 1)
        #expect(Self.value(reply, requests, ["namespace": "diary", "method": "add", "code": "OK"]) == 1)
        #expect(Self.value(reply, "mentoryd_events_published_total", ["topic": "diary"]) == 1)
        #expect(
            Self.value(reply, "mentoryd_subscriber_resets_total", ["topic": "mentor"]) == 0,
            "every topic shows, at zero before anything happened on it")
        // The probe connection, this test's client, and mentoryctl's.
        #expect((Self.value(reply, "mentoryd_connections_total") ?? 0) >= 3)
        #expect(reply.families.allSatisfy { $0.name.hasPrefix("mentoryd_") && !$0.help.isEmpty })

        let prometheus = try await daemon.ctl(["metrics", "--prometheus"])
        #expect(prometheus.status == 0, "\(prometheus.stderr)")
        let check = PrometheusTextFormat.check(prometheus.stdout)
        #expect(check.problems == [], "\(prometheus.stdout)")
        #expect(check.samples.allSatisfy { $0.name.hasPrefix("mentoryd_") })
        let pingLine = check.samples.first {
            $0.name == requests && $0.labels == ["namespace": "session", "method": "ping", "code": "OK"]
        }
        #expect((pingLine?.value ?? 0) >= Double(pings))
        #expect(
            check.samples.contains {
                $0.name == "mentoryd_request_duration_seconds_bucket" && $0.labels["namespace"] == "session"
                    && $0.labels["le"] == "+Inf" && $0.value >= Double(pings)
            })

        let text = try await daemon.ctl(["metrics"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("mentoryd_requests_total (counter): "))
        #expect(text.stdout.contains("code=NOT_FOUND method=get namespace=diary  1\n"))

        let both = try await daemon.ctl(["metrics", "--json", "--prometheus"])
        #expect(both.status == 64, "--json and --prometheus exclude each other")
        #expect(await daemon.stop() == 0)
    }

    @Test("a connection refused at the limit is counted with its reason")
    func refusedConnections() async throws {
        let daemon = try await DaemonProcess(environment: [
            "MENTORYD_LIMITS_MAX_CONNECTIONS": "2", "MENTORYD_STORAGE_BACKEND": "memory",
        ])
        defer { daemon.removeFiles() }
        // Open connections until one is refused (the start-up probe's may still count for a moment).
        var held: [MentoryClient] = []
        var wasRefused = false
        while !wasRefused, held.count < 10 {
            do {
                held.append(try await daemon.client())
            } catch {
                wasRefused = true
            }
        }
        #expect(wasRefused && held.count <= 2)
        for client in held { await client.close() }
        // The daemon notices the closes on its own time: ask until a slot is free.
        var metrics = try await daemon.ctl(["metrics", "--json"])
        _ = try await eventually(timeout: .seconds(30), interval: .milliseconds(50)) {
            if metrics.status == 0 { return true }
            metrics = try await daemon.ctl(["metrics", "--json"])
            return metrics.status == 0
        }
        #expect(metrics.status == 0, "\(metrics.stderr)")
        let reply = try Mentory_V1_MetricsReply(jsonString: metrics.stdout)
        let refused = Self.value(reply, "mentoryd_connections_refused_total", ["reason": "max_connections"]) ?? 0
        #expect(refused >= 1)
        #expect(Self.value(reply, "mentoryd_connections_refused_total", ["reason": "credentials"]) == 0)
        #expect(await daemon.stop() == 0)
    }

    static func entry() -> Mentory_V1_DiaryAddRequest {
        var request = Mentory_V1_DiaryAddRequest()
        request.recordDate = "2026-11-21"
        request.title = "Counted"
        request.text = "An entry whose commit is counted."
        request.emotion = .neutral
        return request
    }
}
