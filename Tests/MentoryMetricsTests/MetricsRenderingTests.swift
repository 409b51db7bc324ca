import CoreMetrics
import MentoryClient
import MentoryMetrics
import MentoryTestSupport
import MentoryWire
import SwiftProtobuf
import Testing

@Suite("Metrics rendering")
struct MetricsRenderingTests {
    static func label(_ name: String, _ value: String) -> Mentory_V1_MetricLabel {
        var label = Mentory_V1_MetricLabel()
        label.name = name
        label.value = value
        return label
    }

    /// A snapshot with one family of each type, label values needing escapes, and a help text too.
    static var known: Mentory_V1_MetricsReply {
        var requests = Mentory_V1_MetricFamily()
        requests.name = "mentoryd_requests_total"
        requests.help = "Requests answered.\nBy namespace, method and code; a \\ stays."
        requests.type = .counter
        var ok = Mentory_V1_MetricSample()
        ok.labels = [label("code", "OK"), label("method", "ping"), label("namespace", "session")]
        ok.value = 12
        var odd = Mentory_V1_MetricSample()
        odd.labels = [label("code", "NOT_FOUND"), label("method", "say \"hi\"\\\r\nnow"), label("namespace", "x")]
        odd.value = 1
        requests.samples = [ok, odd]

        var connections = Mentory_V1_MetricFamily()
        connections.name = "mentoryd_connections"
        connections.help = "Connections that completed the handshake."
        connections.type = .gauge
        var open = Mentory_V1_MetricSample()
        open.value = 3
        connections.samples = [open]

        var duration = Mentory_V1_MetricFamily()
        duration.name = "mentoryd_request_duration_seconds"
        duration.help = "Time per request."
        duration.type = .histogram
        duration.bucketBounds = [0.0001, 0.0025, 1]
        var session = Mentory_V1_MetricSample()
        session.labels = [label("namespace", "session")]
        session.bucketCounts = [2, 5, 5]
        session.count = 6
        session.sum = 2.00125
        duration.samples = [session]

        var empty = Mentory_V1_MetricFamily()
        empty.name = "mentoryd_storage_fsync_seconds"
        empty.help = "Fsync time."
        empty.type = .histogram
        empty.bucketBounds = [0.5]

        var reply = Mentory_V1_MetricsReply()
        reply.families = [connections, duration, requests, empty]
        return reply
    }

    @Test("the Prometheus text of a known snapshot, line by line")
    func prometheusLines() {
        let text = MetricsRendering.prometheus(Self.known)
        let expected = [
            "# HELP mentoryd_connections Connections that completed the handshake.",
            "# TYPE mentoryd_connections gauge",
            "mentoryd_connections 3",
            "# HELP mentoryd_request_duration_seconds Time per request.",
            "# TYPE mentoryd_request_duration_seconds histogram",
            #"mentoryd_request_duration_seconds_bucket{namespace="session",le="0.0001"} 2"#,
            #"mentoryd_request_duration_seconds_bucket{namespace="session",le="0.0025"} 5"#,
            #"mentoryd_request_duration_seconds_bucket{namespace="session",le="1"} 5"#,
            #"mentoryd_request_duration_seconds_bucket{namespace="session",le="+Inf"} 6"#,
            #"mentoryd_request_duration_seconds_sum{namespace="session"} 2.00125"#,
            #"mentoryd_request_duration_seconds_count{namespace="session"} 6"#,
            #"# HELP mentoryd_requests_total Requests answered.\nBy namespace, method and code; a \\ stays."#,
            "# TYPE mentoryd_requests_total counter",
            #"mentoryd_requests_total{code="OK",method="ping",namespace="session"} 12"#,
            "mentoryd_requests_total{code=\"NOT_FOUND\",method=\"say \\\"hi\\\"\\\\\r\\nnow\",namespace=\"x\"} 1",
            "# HELP mentoryd_storage_fsync_seconds Fsync time.",
            "# TYPE mentoryd_storage_fsync_seconds histogram",
        ]
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.last == "", "the text ends with a line feed")
        for (index, line) in lines.dropLast().enumerated() {
            #expect(index < expected.count && line == expected[index], "line \(index + 1)")
        }
        #expect(lines.count - 1 == expected.count)
        let check = PrometheusTextFormat.check(text)
        #expect(check.problems == [])
        let odd = check.samples.first { $0.labels["namespace"] == "x" }
        #expect(odd?.labels["method"] == "say \"hi\"\\\r\nnow", "escaping round-trips")
    }

    @Test("numbers are written as Prometheus reads them")
    func numbers() {
        #expect(MetricsRendering.number(42) == "42")
        #expect(MetricsRendering.number(-3) == "-3")
        #expect(MetricsRendering.number(0.25) == "0.25")
        #expect(MetricsRendering.number(1e-05) == "1e-05")
        #expect(MetricsRendering.number(.infinity) == "+Inf")
        #expect(MetricsRendering.number(-.infinity) == "-Inf")
        #expect(MetricsRendering.number(.nan) == "NaN")
        #expect(MetricsRendering.number(1e20) == "1e+20")
    }

    @Test("a live backend's snapshot renders as valid Prometheus text")
    func backendPrometheus() {
        let factory = MentoryMetricsFactory()
        for name in MentoryMetric.all.map(\.name) where name.hasSuffix("_total") {
            Counter(label: name, dimensions: [("label", "va\"lue\n")], factory: factory).increment()
        }
        CoreMetrics.Timer(
            label: MentoryMetric.requestDuration.name, dimensions: [("namespace", "diary")], factory: factory
        )
        .recordMicroseconds(300)
        Recorder(label: MentoryMetric.storageCommitBatchEntries.name, factory: factory).record(3)
        Gauge(label: MentoryMetric.subscribers.name, factory: factory).record(2)
        let text = MetricsRendering.prometheus(factory.snapshot())
        let check = PrometheusTextFormat.check(text)
        #expect(check.problems == [])
        #expect(check.samples.allSatisfy { $0.name.hasPrefix("mentoryd_") })
        #expect(
            check.samples.contains {
                $0.name == "mentoryd_request_duration_seconds_bucket" && $0.labels["le"] == "+Inf"
            })
    }

    @Test("the checker itself refuses broken text")
    func checkerRefuses() {
        let broken = [
            "mentoryd_x 1\n",  // no HELP or TYPE
            "# HELP mentoryd_x x\n# TYPE mentoryd_x counter\nmentoryd_x{a=\"b} 1\n",  // unterminated value
            "# HELP mentoryd_x x\n# TYPE mentoryd_x counter\nmentoryd_x{a=\"\\q\"} 1\n",  // bad escape
            "# HELP mentoryd_x x\n# TYPE mentoryd_x counter\nmentoryd_x one\n",  // bad value
            "# HELP mentoryd_h h\n# TYPE mentoryd_h histogram\nmentoryd_h_bucket{le=\"1\"} 2\nmentoryd_h_sum 1\n"
                + "mentoryd_h_count 2\n",  // no +Inf bucket
            "# HELP mentoryd_x x\n# TYPE mentoryd_x counter\nmentoryd_x 1",  // no final line feed
        ]
        for text in broken {
            #expect(!PrometheusTextFormat.check(text).problems.isEmpty, "\(text)")
        }
    }

    @Test("JSON and text renderings")
    func jsonAndText() throws {
        let json = MetricsRendering.json(Self.known)
        #expect(!json.contains("\n"))
        let decoded = try Mentory_V1_MetricsReply(jsonString: json)
        #expect(decoded == Self.known)
        #expect(json.contains(#""count":6"#), "64-bit numbers are numbers")

        let text = MetricsRendering.text(Self.known)
        #expect(text.contains("mentoryd_connections (gauge): Connections that completed the handshake.\n  3\n"))
        #expect(text.contains("  code=OK method=ping namespace=session  12\n"))
        #expect(text.contains("  namespace=session  count 6  mean 333.54 ms  p50 ≤ 2.5 ms  p99 > 1 s\n"))
    }
}
