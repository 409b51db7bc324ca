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

    struct RequestKey: Hashable {
        var namespace: String
        var method: String
        var code: UInt32
    }

    let factory: MentoryMetricsFactory
    private var declaredMethods: [String: Set<String>] = [:]
    private var requests: [RequestKey: Counter] = [:]
    private var durations: [String: CoreMetrics.Timer] = [:]
    private var published: [String: Counter] = [:]
    private var resets: [String: Counter] = [:]
    private let connections: Gauge
    private let subscribers: Gauge

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
        let counter =
            self.requests[key]
            ?? {
                let counter = Counter(
                    label: MentoryMetric.requests.name,
                    dimensions: [
                        ("namespace", key.namespace), ("method", key.method),
                        ("code", ResultCodeLabel.label(key.code)),
                    ],
                    factory: self.factory
                )
                self.requests[key] = counter
                return counter
            }()
        counter.increment()
        let timer =
            self.durations[key.namespace]
            ?? {
                let timer = CoreMetrics.Timer(
                    label: MentoryMetric.requestDuration.name,
                    dimensions: [("namespace", key.namespace)],
                    factory: self.factory
                )
                self.durations[key.namespace] = timer
                return timer
            }()
        timer.recordNanoseconds(duration.nanoseconds)
    }

    /// Counts a change published on `topic` (a registered topic).
    func recordPublished(_ topic: String) {
        Self.counter(&self.published, topic, MentoryMetric.eventsPublished, self.factory).increment()
    }

    /// Counts a RESET event sent on `topic` (a registered topic).
    func recordReset(_ topic: String) {
        Self.counter(&self.resets, topic, MentoryMetric.subscriberResets, self.factory).increment()
    }

    /// Creates the per-topic counters of `topic` (at zero) if they do not exist yet, so that a
    /// topic nothing happened on yet still shows.
    func declareTopic(_ topic: String) {
        _ = Self.counter(&self.published, topic, MentoryMetric.eventsPublished, self.factory)
        _ = Self.counter(&self.resets, topic, MentoryMetric.subscriberResets, self.factory)
    }

    /// Sets the gauges the engine knows the value of.
    func setGauges(connections: Int, subscribers: Int) {
        self.connections.record(connections)
        self.subscribers.record(subscribers)
    }

    private static func counter(
        _ cache: inout [String: Counter],
        _ topic: String,
        _ metric: MetricDescription,
        _ factory: MentoryMetricsFactory
    ) -> Counter {
        if let counter = cache[topic] { return counter }
        let counter = Counter(label: metric.name, dimensions: [("topic", topic)], factory: factory)
        cache[topic] = counter
        return counter
    }
}

extension MentoryEngine {
    /// Counts an answered request in `mentoryd_requests_total` and
    /// `mentoryd_request_duration_seconds`; the connection calls it once per response.
    package func recordRequest(_ request: InboundRequest, _ response: OutboundResponse, duration: Duration) {
        self.metrics.recordRequest(
            namespace: request.namespace,
            method: request.method,
            code: response.code,
            duration: duration
        ) { namespace in
            namespace == MentorySchema.Session.name
                ? MentorySchema.Session.methods.map(\.name) : self.handlers[namespace]?.info.methods.map(\.name)
        }
    }

    /// Every metric now, as `session.metrics` replies: the gauges the engine knows are set first,
    /// and every topic's counters shown, at zero if need be.
    public func metricsSnapshot() -> Mentory_V1_MetricsReply {
        for topic in self.topicOwners.keys { self.metrics.declareTopic(topic) }
        self.metrics.setGauges(connections: self.connectionCount, subscribers: self.subscriberCount)
        return self.metricsFactory.snapshot(maxBytes: self.configuration.maxReplyBytes)
    }
}

extension Duration {
    /// The duration in whole nanoseconds, saturating.
    fileprivate var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
