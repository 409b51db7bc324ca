import CoreMetrics
import MentoryMetrics
import MentoryWire

/// The engine's metrics, isolated to the engine: every metric object is created once, on first
/// use, and cached by its labels, so recording costs a dictionary lookup and an atomic add.
///
/// Labels come only from what the daemon declares (registered namespaces, their declared methods,
/// topics, error codes), never from a request's free text: a client sending random names adds
/// nothing here (they count under `unknown`).
final class EngineMetrics {
    /// The label of a namespace or method the daemon does not declare.
    static let unknown = "unknown"

    struct SnapshotKey: Hashable {
        var topic: String
        var code: UInt32
    }

    struct RequestKey: Hashable {
        var namespace: String
        var method: String
        var code: UInt32
    }

    let factory: MentoryMetricsFactory
    private var declaredMethods: [String: Set<String>] = [:]
    /// The request counters and duration histograms, held as the series themselves: recording into one is an
    /// atomic add, with no swift-metrics wrapper (and its existential call) in between.
    private var requests: [RequestKey: CounterSeries] = [:]
    private var durations: [String: HistogramSeries] = [:]
    /// Each topic's count of published changes, held as the series itself: ``syncPublished(_:published:)`` reads
    /// how many it counts already from its value.
    private var published: [String: CounterSeries] = [:]
    private var resets: [String: Counter] = [:]
    private var snapshots: [SnapshotKey: Counter] = [:]
    private var snapshotDurations: [String: CoreMetrics.Timer] = [:]
    private let connections: Gauge
    private let subscribers: Gauge
    /// Where the batch of frames being handled is (``MentoryEngine/openBatch()``).
    private enum Batch {
        /// No batch is open: each request is recorded as it is answered.
        case closed
        /// A batch is open, and has answered no request yet: the first is recorded as it is answered.
        case open
        /// A batch is open, and has answered a request: the others it answers successfully are recorded together
        /// when it closes, with one reading of the clock.
        case answering
    }

    private var batch = Batch.closed
    /// The first of the methods with requests answered in the batch being handled, each linking to the next
    /// (``MethodMetrics/countInBatch(in:)``): recorded together, with one reading of the clock, by
    /// ``settleBatch(received:)``. A list through the methods themselves: no array to grow and empty per batch.
    private var firstBatched: MethodMetrics?

    init(factory: MentoryMetricsFactory) {
        self.factory = factory
        self.connections = Gauge(label: MentoryMetric.connections.name, factory: factory)
        self.subscribers = Gauge(label: MentoryMetric.subscribers.name, factory: factory)
    }

    /// Counts one answered request and its duration.
    ///
    /// `declared(namespace)` lists the methods of a namespace the daemon serves, `nil` for one it
    /// does not; it is asked once per served namespace.
    func recordRequest(
        namespace: String,
        method: String,
        code: UInt32,
        duration: Duration,
        declared: (String) -> [String]?
    ) {
        // Codes mentory.proto does not declare (a future plugin's) share one key, as they share a label.
        let code = ResultCodeLabel.isDeclared(code) ? code : .max
        var key = RequestKey(namespace: Self.unknown, method: Self.unknown, code: code)
        if let methods = self.declaredMethods[namespace] {
            key.namespace = namespace
            if methods.contains(method) { key.method = method }
        } else if let methods = declared(namespace) {
            self.declaredMethods[namespace] = Set(methods)
            key.namespace = namespace
            if methods.contains(method) { key.method = method }
        }
        self.requestCounter(key).increment(by: 1)
        self.durationTimer(key.namespace).recordNanoseconds(duration.nanoseconds)
    }

    /// The counter of requests to `key`, made on first use.
    private func requestCounter(_ key: RequestKey) -> CounterSeries {
        Self.cached(&self.requests, key) {
            self.factory.counterSeries(
                label: MentoryMetric.requests.name,
                dimensions: [
                    ("namespace", key.namespace), ("method", key.method), ("code", ResultCodeLabel.label(key.code)),
                ]
            )
        }
    }

    /// The request-duration histogram of `namespace` (a label), made on first use.
    private func durationTimer(_ namespace: String) -> HistogramSeries {
        Self.cached(&self.durations, namespace) {
            self.factory.timerSeries(label: MentoryMetric.requestDuration.name, dimensions: [("namespace", namespace)])
        }
    }

    /// The metric objects of requests to `namespace.method`, a method the daemon serves; `declared` are
    /// the methods its namespace declares (a method it does not declare counts under `unknown`).
    func methodMetrics(namespace: String, method: String, declared: [String]) -> MethodMetrics {
        // Set on every route made: a plugin's registration may change what it declares.
        self.declaredMethods[namespace] = Set(declared)
        let label = self.declaredMethods[namespace]!.contains(method) ? method : Self.unknown
        return MethodMetrics(metrics: self, namespace: namespace, method: label)
    }

    /// One method's request counters (by result code, each made on first use, as by name) and its
    /// namespace's duration histogram, held by its ``MethodRoute``: recording looks nothing up by name.
    final class MethodMetrics {
        private unowned let metrics: EngineMetrics
        private let namespace: String
        private let method: String
        private let duration: HistogramSeries
        private var succeeded: CounterSeries?
        /// Counters of the failure codes seen, by code; a handful at most.
        private var failed: [(code: UInt32, counter: CounterSeries)] = []

        init(metrics: EngineMetrics, namespace: String, method: String) {
            self.metrics = metrics
            self.namespace = namespace
            self.method = method
            self.duration = metrics.durationTimer(namespace)
        }

        /// Requests answered successfully in the batch being handled, not yet recorded.
        private var answeredInBatch: Int64 = 0
        /// The next method with requests answered in the batch (``EngineMetrics/firstBatched``).
        private var nextBatched: MethodMetrics?

        /// Counts one answered request with result `code`, and its duration.
        func record(code: UInt32, duration: Duration) {
            self.counter(code).increment(by: 1)
            self.duration.recordNanoseconds(duration.nanoseconds)
        }

        /// Counts one request answered successfully in the batch `metrics` is handling; it is recorded, timed to
        /// the batch's end, by ``EngineMetrics/settleBatch(received:)``.
        @inline(__always)
        func countInBatch(in metrics: EngineMetrics) {
            if self.answeredInBatch == 0 {
                self.nextBatched = metrics.firstBatched
                metrics.firstBatched = self
            }
            self.answeredInBatch &+= 1
        }

        /// Records the requests ``countInBatch(in:)`` counted, each taking `nanoseconds`, and returns the next
        /// method the batch answered.
        fileprivate func settleBatch(nanoseconds: Int64) -> MethodMetrics? {
            self.counter(0).increment(by: self.answeredInBatch)
            self.duration.recordNanoseconds(nanoseconds, count: self.answeredInBatch)
            self.answeredInBatch = 0
            defer { self.nextBatched = nil }
            return self.nextBatched
        }

        private func counter(_ code: UInt32) -> CounterSeries {
            if code == 0, let counter = self.succeeded { return counter }
            // Codes mentory.proto does not declare (a future plugin's) share one key, as they share a label.
            let code = ResultCodeLabel.isDeclared(code) ? code : .max
            for entry in self.failed where entry.code == code { return entry.counter }
            let counter = self.metrics.requestCounter(
                RequestKey(namespace: self.namespace, method: self.method, code: code))
            if code == 0 { self.succeeded = counter } else { self.failed.append((code, counter)) }
            return counter
        }
    }

    /// Opens a batch of frames: its first request answered is recorded at once, the successes after it as it closes.
    func openBatch() {
        self.batch = .open
    }

    /// Counts a request to the method of `metrics` answered with `code` in the open batch, when it is a success
    /// and the batch has answered a request before it, and says whether it did. When not, the request is recorded at
    /// once, as the batch's first or with no batch open.
    @inline(__always)
    func countsInBatch(_ metrics: MethodMetrics?, code: UInt32) -> Bool {
        switch self.batch {
        case .closed:
            return false
        case .open:
            self.batch = .answering
            return false
        case .answering:
            guard let metrics, code == 0 else { return false }
            metrics.countInBatch(in: self)
            return true
        }
    }

    /// Records the requests answered in the batch that `received` started (``MethodMetrics/countInBatch(in:)``): each
    /// is counted, and timed from `received` to now, when their replies are written together.
    func settleBatch(received: ContinuousClock.Instant) {
        self.batch = .closed
        guard self.firstBatched != nil else { return }
        let nanoseconds = (ContinuousClock.now - received).nanoseconds
        var next = self.firstBatched
        self.firstBatched = nil
        while let metrics = next {
            next = metrics.settleBatch(nanoseconds: nanoseconds)
        }
    }

    /// Brings `topic`'s count of published changes up to `published`, the number its ring has given the last of them
    /// (``EventLog/lastSequence``, which numbers a topic's changes from 1 in each run of the daemon): counted when
    /// the metrics are read, so that a publish pays for no dictionary look-up of its own to count itself.
    func syncPublished(_ topic: String, published: UInt64) {
        let series = self.publishedSeries(topic)
        let counted = UInt64(series.value)
        guard published > counted else { return }
        series.increment(by: Int64(published - counted))
    }

    /// The count of changes published on `topic`, made (at zero) on first use.
    private func publishedSeries(_ topic: String) -> CounterSeries {
        Self.cached(&self.published, topic) {
            self.factory.counterSeries(label: MentoryMetric.eventsPublished.name, dimensions: [("topic", topic)])
        }
    }

    /// Counts a state taken for a subscriber of `topic` (a registered topic), ended with `code`, and its duration.
    func recordSnapshot(_ topic: String, code: UInt32, duration: Duration) {
        let code = ResultCodeLabel.isDeclared(code) ? code : .max
        Self.cached(&self.snapshots, SnapshotKey(topic: topic, code: code)) {
            Counter(
                label: MentoryMetric.snapshots.name,
                dimensions: [("topic", topic), ("code", ResultCodeLabel.label(code))], factory: self.factory)
        }.increment()
        Self.cached(&self.snapshotDurations, topic) {
            CoreMetrics.Timer(
                label: MentoryMetric.snapshotDuration.name, dimensions: [("topic", topic)], factory: self.factory)
        }.recordNanoseconds(duration.nanoseconds)
    }

    /// Counts a RESET event sent on `topic` (a registered topic).
    func recordReset(_ topic: String) {
        self.resetCounter(topic).increment()
    }

    /// Creates the per-topic counters of `topic` (at zero) if they do not exist yet, so that a
    /// topic nothing happened on yet still shows.
    func declareTopic(_ topic: String) {
        _ = self.publishedSeries(topic)
        _ = self.resetCounter(topic)
    }

    /// Sets the gauges the engine knows the value of.
    func setGauges(connections: Int, subscribers: Int) {
        self.connections.record(connections)
        self.subscribers.record(subscribers)
    }

    /// The metric object kept in `cache` under `key`, made by `make` and kept on first use.
    private static func cached<Key: Hashable, Metric>(
        _ cache: inout [Key: Metric], _ key: Key, make: () -> Metric
    ) -> Metric {
        if let metric = cache[key] { return metric }
        let metric = make()
        cache[key] = metric
        return metric
    }

    /// The count of RESET events sent on `topic`, made (at zero) on first use.
    private func resetCounter(_ topic: String) -> Counter {
        Self.cached(&self.resets, topic) {
            Counter(label: MentoryMetric.subscriberResets.name, dimensions: [("topic", topic)], factory: self.factory)
        }
    }
}

extension MentoryEngine {
    /// Counts an answered request in `mentoryd_requests_total` and
    /// `mentoryd_request_duration_seconds`; the connection calls it once per response.
    func recordRequest(namespace: String, method: String, code: UInt32, duration: Duration) {
        self.metrics.recordRequest(
            namespace: namespace,
            method: method,
            code: code,
            duration: duration
        ) { namespace in
            self.namespaceInfo(namespace)?.methods.map(\.name)
        }
    }

    /// Opens a batch: until ``closeBatch(received:)``, a request answered successfully after the batch's first is
    /// counted without reading the clock, and recorded with the others when the batch closes. The server opens one
    /// around each batch of frames it handles, whose replies it writes together.
    package func openBatch() {
        self.metrics.openBatch()
    }

    /// Closes the batch ``openBatch()`` opened: each request it answered successfully after its first is counted in
    /// `mentoryd_requests_total`, and timed in `mentoryd_request_duration_seconds` from `received`, when the batch
    /// was taken up, to now, when their replies are written (unread when there are none).
    package func closeBatch(received: ContinuousClock.Instant) {
        self.metrics.settleBatch(received: received)
    }

    /// Every metric now, as `session.metrics` replies: the gauges the engine knows are set first,
    /// and every topic's counters shown, at zero if need be.
    public func metricsSnapshot() -> Mentory_V1_MetricsReply {
        for topic in self.hub.topicNames { self.metrics.declareTopic(topic) }
        // Every ring's, a topic's whose publisher went away too: its changes until then are counted.
        for (topic, published) in self.hub.publishedCounts { self.metrics.syncPublished(topic, published: published) }
        self.metrics.setGauges(connections: self.connectionCount, subscribers: self.subscriberCount)
        for refresh in self.observers.metricsRefreshers { refresh(self) }
        return self.metricsFactory.snapshot(maxBytes: self.configuration.maxReplyBytes)
    }

    /// Runs `refresh` on the engine's executor before each metrics snapshot (the server sets its per-uid gauges).
    package func addMetricsRefresher(_ refresh: @escaping @Sendable (isolated MentoryEngine) -> Void) {
        self.observers.metricsRefreshers.append(refresh)
    }

    /// The topic subscriptions held by each uid's connections (credential-less connections are left out).
    package var subscriptionsPerUID: [UInt32: Int] {
        var counts: [UInt32: Int] = [:]
        for (id, connection) in self.connections {
            guard let uid = connection.context.credentials?.uid else { continue }
            let count = self.hub.count(of: id)
            if count > 0 { counts[uid, default: 0] += count }
        }
        return counts
    }
}

extension Duration {
    /// The duration in whole nanoseconds, saturating.
    var nanoseconds: Int64 {
        // One division: `components` makes two (its seconds and the attoseconds left), on every request. A
        // duration under about nine seconds (a request's, nearly always) fits 64 bits, whose division is a
        // multiplication; a longer one takes the 128-bit division, a call.
        let attoseconds = self.attoseconds
        if let short = Int64(exactly: attoseconds) { return short / 1_000_000_000 }
        return Int64(clamping: attoseconds / 1_000_000_000)
    }
}
