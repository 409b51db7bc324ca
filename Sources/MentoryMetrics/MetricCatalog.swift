/// A metric mentoryd declares: its name, what it means and, for histograms, its buckets.
public struct MetricDescription: Sendable, Hashable {
    /// The family's name, with the `mentoryd_` prefix.
    public let name: String
    /// One sentence for people (Prometheus `# HELP`).
    public let help: String
    /// For a recorder (a histogram of sizes or counts), the upper bounds of its buckets; `nil` uses
    /// ``MetricBuckets/counts``. Timers always use ``MetricBuckets/seconds``.
    public let buckets: [Double]?

    public init(name: String, help: String, buckets: [Double]? = nil) {
        self.name = name
        self.help = help
        self.buckets = buckets
    }
}

/// The fixed bucket bounds of mentoryd's histograms.
///
/// Fixed, so that series from different daemons and restarts can be added up; each is an
/// ascending list of upper bounds, the `+Inf` bucket being implied.
public enum MetricBuckets {
    /// Timers (swift-metrics `Timer`), in seconds: 100 µs to 10 s, in 1-2.5-5 steps.
    public static let seconds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]
    /// Recorders (swift-metrics `Recorder`, sizes and counts): the powers of two from 1 to 65,536.
    public static let counts: [Double] = (0...16).map { Double(1 << $0) }
}

/// Every metric mentoryd records, in one place: the names code uses and the help text the
/// `session.metrics` reply carries.
///
/// A metric created under a name not listed here still works; its help then says so.
///
/// A gauge of the plugins' states (`mentoryd_plugins{state}`) would belong here too; for now
/// `session.status` reports each declared plugin's state.
public enum MentoryMetric {
    /// The prefix of every name the daemon exports.
    public static let prefix = "mentoryd_"

    // MARK: Requests (the engine)

    public static let requests = MetricDescription(
        name: "mentoryd_requests_total",
        help: "Requests answered, by namespace, method (as declared by the namespace, else unknown) and result code "
            + "(OK or the error code's name)."
    )
    public static let requestDuration = MetricDescription(
        name: "mentoryd_request_duration_seconds",
        help: "Time from reading a request to its answer being ready, by namespace (unknown for undeclared ones)."
    )

    // MARK: Connections (the server)

    public static let connections = MetricDescription(
        name: "mentoryd_connections",
        help: "Connections that completed the handshake."
    )
    public static let connectionsTotal = MetricDescription(
        name: "mentoryd_connections_total",
        help: "Connections accepted since the daemon started."
    )
    public static let connectionsRefused = MetricDescription(
        name: "mentoryd_connections_refused_total",
        help: "Connections refused, by reason: max_connections, max_connections_per_uid or credentials."
    )
    public static let outboundBackpressure = MetricDescription(
        name: "mentoryd_outbound_backpressure_total",
        help: "Times a connection's unsent replies and events reached limits.maxOutboundBytes, so that it was no "
            + "longer read until half had drained."
    )

    // MARK: Per-uid budgets (the server); a series per uid with a connection open or bytes still queued

    public static let uidQueuedBytes = MetricDescription(
        name: "mentoryd_uid_queued_bytes",
        help: "Bytes of replies and events queued toward a uid's connections, with those reserved for replies and "
            + "snapshots being computed, by uid; limits.uidQueuedBytes is the budget."
    )
    public static let uidRequestsInFlight = MetricDescription(
        name: "mentoryd_uid_requests_in_flight",
        help: "Requests in flight on a uid's connections, by uid; limits.uidRequestsInFlight is the budget."
    )
    public static let uidConnections = MetricDescription(
        name: "mentoryd_uid_connections",
        help: "Connections a uid has open, by uid; limits.maxConnectionsPerUID is the budget."
    )
    public static let uidSubscriptions = MetricDescription(
        name: "mentoryd_uid_subscriptions",
        help: "Topic subscriptions held by a uid's connections, by uid; limits.uidSubscriptions is the budget."
    )
    public static let uidBudgetLimits = MetricDescription(
        name: "mentoryd_uid_budget_limit",
        help: "Each uid's budget, by budget: queued_bytes, requests_in_flight, connections, subscriptions; "
            + "the ceiling for every uid together is budget=\"total_queued_bytes\"."
    )
    public static let uidBudgetWaits = MetricDescription(
        name: "mentoryd_uid_budget_waits_total",
        help: "Times a connection stopped being read, or had an event refused, because its uid was over "
            + "limits.uidQueuedBytes or limits.uidRequestsInFlight, or all uids over limits.totalQueuedBytes."
    )

    // MARK: Subscriptions (the engine)

    public static let subscribers = MetricDescription(
        name: "mentoryd_subscribers",
        help: "Connections subscribed to at least one topic."
    )
    public static let subscriberResets = MetricDescription(
        name: "mentoryd_subscriber_resets_total",
        help: "RESET events sent, by topic: a subscriber fell behind, or could not resume where it asked to."
    )
    public static let snapshots = MetricDescription(
        name: "mentoryd_snapshots_total",
        help: "States taken for subscribers' SNAPSHOT and RESET events, by topic and result code (OK or the error "
            + "code's name)."
    )
    public static let snapshotDuration = MetricDescription(
        name: "mentoryd_snapshot_duration_seconds",
        help: "Time taking a topic's state for a subscriber, from the handler or plugin publishing it, by topic."
    )
    public static let eventsPublished = MetricDescription(
        name: "mentoryd_events_published_total",
        help: "Changes published, by topic."
    )

    // MARK: Storage (the SQLite store)

    public static let storageCommits = MetricDescription(
        name: "mentoryd_storage_commits_total",
        help: "Transactions committed by the SQLite store's group-commit writer."
    )
    public static let storageCommitBatchEntries = MetricDescription(
        name: "mentoryd_storage_commit_batch_entries",
        help: "Writes shared by one group commit.",
        buckets: MetricBuckets.counts
    )
    public static let storageFsync = MetricDescription(
        name: "mentoryd_storage_fsync_seconds",
        help: "Time spent making each group commit durable (its fsync)."
    )
    public static let storageCommitFailures = MetricDescription(
        name: "mentoryd_storage_commit_failures_total",
        help: "Group commits that failed; their writes were answered with STORAGE_FAILURE."
    )

    // MARK: The metrics backend itself

    public static let seriesRefused = MetricDescription(
        name: "mentoryd_metrics_series_refused_total",
        help: "New series the metrics backend did not keep, by reason: series_cap (folded into the family's "
            + "series labelled overflow=\"true\") or type_conflict (a name already used with another type)."
    )

    /// Every metric above.
    public static let all: [MetricDescription] = [
        requests, requestDuration, connections, connectionsTotal, connectionsRefused, outboundBackpressure,
        uidQueuedBytes, uidRequestsInFlight, uidConnections, uidSubscriptions, uidBudgetLimits,
        uidBudgetWaits,
        subscribers, subscriberResets, snapshots, snapshotDuration, eventsPublished, storageCommits,
        storageCommitBatchEntries, storageFsync,
        storageCommitFailures, seriesRefused,
    ]
}
