import CoreMetrics
import MentoryMetrics

/// The server's metric objects, created once per server and shared by its connections.
struct ServerMetrics: Sendable {
    /// Connections accepted (`mentoryd_connections_total`).
    let accepted: Counter
    /// Connections refused at the connection limit, the per-uid limit, or for want of credentials.
    let refusedMaxConnections: Counter
    let refusedMaxConnectionsPerUID: Counter
    let refusedCredentials: Counter
    /// Times a connection reached `limits.maxOutboundBytes` (`mentoryd_outbound_backpressure_total`).
    let outboundBackpressure: Counter
    /// Times a connection waited for its uid's budget (`mentoryd_uid_budget_waits_total`).
    let budgetWaits: Counter

    init(factory: any MetricsFactory) {
        func refused(_ reason: String) -> Counter {
            Counter(label: MentoryMetric.connectionsRefused.name, dimensions: [("reason", reason)], factory: factory)
        }
        self.accepted = Counter(label: MentoryMetric.connectionsTotal.name, factory: factory)
        self.refusedMaxConnections = refused("max_connections")
        self.refusedMaxConnectionsPerUID = refused("max_connections_per_uid")
        self.refusedCredentials = refused("credentials")
        self.outboundBackpressure = Counter(label: MentoryMetric.outboundBackpressure.name, factory: factory)
        self.budgetWaits = Counter(label: MentoryMetric.uidBudgetWaits.name, factory: factory)
    }
}
