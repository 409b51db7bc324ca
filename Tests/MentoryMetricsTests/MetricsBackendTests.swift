import CoreMetrics
import MentoryMetrics
import MentoryWire
import Testing

@Suite("Metrics backend")
struct MetricsBackendTests {
    /// The samples of family `name`, by their labels written `a=b,c=d`.
    static func samples(_ reply: Mentory_V1_MetricsReply, _ name: String) -> [String: Mentory_V1_MetricSample] {
        let family = reply.families.first { $0.name == name }
        return Dictionary(
            (family?.samples ?? []).map { sample in
                (sample.labels.map { "\($0.name)=\($0.value)" }.joined(separator: ","), sample)
            }
        ) { first, _ in first }
    }

    @Test("counters, gauges, meters, recorders and timers are reported with their types and values")
    func kinds() throws {
        let factory = MentoryMetricsFactory()
        let requests = Counter(label: "mentoryd_requests_total", dimensions: [("code", "OK")], factory: factory)
        requests.increment(by: 3)
        Counter(label: "mentoryd_requests_total", dimensions: [("code", "OK")], factory: factory).increment()
        Counter(label: "mentoryd_requests_total", dimensions: [("code", "NOT_FOUND")], factory: factory).increment()
        Gauge(label: "mentoryd_connections", factory: factory).record(7)
        let meter = Meter(label: "queue_depth", factory: factory)
        meter.set(Int64(10))
        meter.decrement(by: 4)
        let batch = Recorder(label: "mentoryd_storage_commit_batch_entries", factory: factory)
        for value in [1, 3, 3, 100_000] { batch.record(value) }
        let fsync = CoreMetrics.Timer(label: "mentoryd_storage_fsync_seconds", factory: factory)
        fsync.recordMilliseconds(2)
        fsync.recordNanoseconds(50_000)

        let reply = factory.snapshot()
        #expect(reply.families.map(\.name) == reply.families.map(\.name).sorted())
        #expect(!reply.truncated)
        let types = Dictionary(uniqueKeysWithValues: reply.families.map { ($0.name, $0.type) })
        #expect(types["mentoryd_requests_total"] == .counter)
        #expect(types["mentoryd_connections"] == .gauge)
        #expect(types["mentoryd_queue_depth"] == .gauge, "a name without the prefix gets it")
        #expect(types["mentoryd_storage_commit_batch_entries"] == .histogram)
        #expect(types["mentoryd_storage_fsync_seconds"] == .histogram)

        let counts = Self.samples(reply, "mentoryd_requests_total")
        #expect(counts["code=OK"]?.value == 4, "the same name and labels share one series")
        #expect(counts["code=NOT_FOUND"]?.value == 1)
        #expect(Self.samples(reply, "mentoryd_connections")[""]?.value == 7)
        #expect(Self.samples(reply, "mentoryd_queue_depth")[""]?.value == 6)

        let batchFamily = try #require(reply.families.first { $0.name == "mentoryd_storage_commit_batch_entries" })
        #expect(batchFamily.bucketBounds == MetricBuckets.counts)
        let batchSample = try #require(batchFamily.samples.first)
        #expect(batchSample.count == 4)
        #expect(batchSample.sum == 100_007)
        // Cumulative: ≤1: 1, ≤2: 1, ≤4: 3, … ≤65536: 3; the +Inf bucket (the count) holds 100,000 too.
        #expect(Array(batchSample.bucketCounts.prefix(3)) == [1, 1, 3])
        #expect(batchSample.bucketCounts.last == 3)

        let fsyncFamily = try #require(reply.families.first { $0.name == "mentoryd_storage_fsync_seconds" })
        #expect(fsyncFamily.bucketBounds == MetricBuckets.seconds)
        let fsyncSample = try #require(fsyncFamily.samples.first)
        #expect(fsyncSample.count == 2)
        #expect(abs(fsyncSample.sum - 0.00205) < 1e-12, "timers are recorded in seconds")
        let bound = try #require(MetricBuckets.seconds.firstIndex(of: 0.0025))
        #expect(fsyncSample.bucketCounts[bound] == 2)
        #expect(fsyncSample.bucketCounts[bound - 1] == 1)

        let help = Dictionary(uniqueKeysWithValues: reply.families.map { ($0.name, $0.help) })
        #expect(help["mentoryd_requests_total"] == MentoryMetric.requests.help)
        #expect(help["mentoryd_queue_depth"]?.contains("no description") == true)
    }

    @Test("names and label names are made valid for Prometheus")
    func names() {
        #expect(MentoryMetricsFactory.familyName("mentoryd_ok_total") == "mentoryd_ok_total")
        #expect(MentoryMetricsFactory.familyName("http.requests-total") == "mentoryd_http_requests_total")
        #expect(MentoryMetricsFactory.labelName("peer.name") == "peer_name")
        #expect(MentoryMetricsFactory.labelName("a:b") == "a_b")
        #expect(MentoryMetricsFactory.labelName("9lives") == "_9lives")
    }

    @Test("past the series cap, new label sets fold into one overflow series and are counted")
    func seriesCap() throws {
        let factory = MentoryMetricsFactory(maxSeries: 10)
        let initial = factory.seriesCount
        let room = 10 - initial
        for index in 0..<room {
            Counter(label: "mentoryd_hostile_total", dimensions: [("method", "m\(index)")], factory: factory)
                .increment()
        }
        #expect(factory.seriesCount == 10)
        // A hostile stream of fresh label values: none of them is kept.
        for index in 0..<1_000 {
            Counter(label: "mentoryd_hostile_total", dimensions: [("method", "x\(index)")], factory: factory)
                .increment()
        }
        // A new family past the cap is not kept either, but still works for its caller.
        let unkept = Counter(label: "mentoryd_late_total", factory: factory)
        unkept.increment()
        // An existing series keeps counting.
        Counter(label: "mentoryd_hostile_total", dimensions: [("method", "m0")], factory: factory).increment()

        #expect(factory.seriesCount == 10)
        let reply = factory.snapshot()
        #expect(!reply.families.contains { $0.name == "mentoryd_late_total" })
        let hostile = Self.samples(reply, "mentoryd_hostile_total")
        #expect(hostile.count == room + 1)
        #expect(hostile["method=m0"]?.value == 2)
        #expect(hostile["overflow=true"]?.value == 1_000)
        let refused = Self.samples(reply, MentoryMetric.seriesRefused.name)
        #expect(refused["reason=series_cap"]?.value == 1_001)
        #expect(refused["reason=type_conflict"]?.value == 0)
    }

    @Test("a name reused with another type is refused, counted, and still records harmlessly")
    func typeConflict() {
        let factory = MentoryMetricsFactory()
        Counter(label: "mentoryd_things", factory: factory).increment()
        Gauge(label: "mentoryd_things", factory: factory).record(99)
        let reply = factory.snapshot()
        #expect(reply.families.first { $0.name == "mentoryd_things" }?.type == .counter)
        #expect(Self.samples(reply, "mentoryd_things")[""]?.value == 1)
        #expect(Self.samples(reply, MentoryMetric.seriesRefused.name)["reason=type_conflict"]?.value == 1)
    }

    @Test("a destroyed metric's series goes away and frees its place")
    func destroy() {
        let factory = MentoryMetricsFactory()
        let before = factory.seriesCount
        let counter = Counter(label: "mentoryd_short_lived_total", factory: factory)
        #expect(factory.seriesCount == before + 1)
        counter.destroy()
        #expect(factory.seriesCount == before)
        #expect(!factory.snapshot().families.contains { $0.name == "mentoryd_short_lived_total" })
    }

    @Test("concurrent recording from many tasks loses nothing")
    func concurrency() async throws {
        let factory = MentoryMetricsFactory()
        let counter = Counter(label: "mentoryd_parallel_total", factory: factory)
        let histogram = Recorder(label: "mentoryd_parallel_sizes", factory: factory)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<10_000 {
                        counter.increment()
                        histogram.record(2)
                    }
                }
            }
        }
        let reply = factory.snapshot()
        #expect(Self.samples(reply, "mentoryd_parallel_total")[""]?.value == 80_000)
        let sample = try #require(Self.samples(reply, "mentoryd_parallel_sizes")[""])
        #expect(sample.count == 80_000)
        #expect(sample.sum == 160_000)
    }

    @Test("a snapshot larger than its budget is cut and says so")
    func budget() throws {
        let factory = MentoryMetricsFactory()
        for index in 0..<500 {
            Counter(label: "mentoryd_wide_total", dimensions: [("id", "series-\(index)")], factory: factory)
                .increment()
        }
        let full = factory.snapshot()
        let fullSize = (try full.serializedBytes() as [UInt8]).count
        #expect(!full.truncated)
        let cut = factory.snapshot(maxBytes: fullSize / 2)
        #expect(cut.truncated)
        #expect((try cut.serializedBytes() as [UInt8]).count <= fullSize / 2)
        let kept = Self.samples(cut, "mentoryd_wide_total").count
        #expect(kept > 0 && kept < 500)
    }

    @Test("result code labels come from the schema's ErrorCode names")
    func resultCodes() {
        #expect(ResultCodeLabel.label(0) == "OK")
        #expect(ResultCodeLabel.label(UInt32(Mentory_V1_ErrorCode.notFound.rawValue)) == "NOT_FOUND")
        #expect(ResultCodeLabel.label(UInt32(Mentory_V1_ErrorCode.unknownMethod.rawValue)) == "UNKNOWN_METHOD")
        #expect(ResultCodeLabel.label(9_999) == "unknown")
        #expect(ResultCodeLabel.isDeclared(0) && ResultCodeLabel.isDeclared(22))
        #expect(!ResultCodeLabel.isDeclared(9_999) && !ResultCodeLabel.isDeclared(.max))
    }
}
