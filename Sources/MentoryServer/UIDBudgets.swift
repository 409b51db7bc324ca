import CoreMetrics
import MentoryMetrics

/// Per-person budgets, the way dbus-broker accounts per user: every uid's connections are counted together.
///
/// Accounting, not domain state: byte and request counts, and the connections waiting for room. Confined to
/// the server's event loop, which every connection (and the engine) runs on, so it needs no lock or atomic.
///
/// A uid's **queued bytes** are the replies and events written toward its connections that the kernel has not
/// taken yet, plus the bytes reserved for replies and snapshots still being computed: a request that suspends
/// reserves its reply's size before it is dispatched (the largest reply that method gave so far, or a whole frame
/// when it gave none yet), and the reservation is settled to the real size once the reply is encoded. So the bound
/// does not overshoot by the replies in flight.
///
/// A connection handles no more frames (and is not read) while its uid's queued bytes reach
/// ``Limits/queuedBytesPerUID``, its uid has ``Limits/requestsInFlightPerUID`` requests in flight, or all uids
/// together have ``Limits/totalQueuedBytes`` queued. Events toward such a uid are refused, and the subscriber gets
/// a reset once there is room again (what the protocol does for any slow subscriber). The connections that
/// waited are woken once their uid is back to half its budget (and all uids together to half the ceiling).
/// Nothing is dropped; only the uid over its budget waits.
final class UIDBudgets {
    /// What each uid, and all of them together, may hold.
    struct Limits {
        /// Bytes queued or reserved toward one uid's connections together (`limits.uidQueuedBytes`).
        var queuedBytesPerUID: Int
        /// Requests one uid's connections may have in flight together (`limits.uidRequestsInFlight`).
        var requestsInFlightPerUID: Int
        /// Bytes queued or reserved toward every connection together (`limits.totalQueuedBytes`).
        var totalQueuedBytes: Int
    }

    /// The limits; a reload may change them.
    var limits: Limits
    /// The reservation for a reply whose size is not known: a whole frame.
    let maxReplyBytes: Int
    /// The reservation for the snapshots of a `subscribe`, or the resets after a drain: while one is taken it is
    /// held three times over (the handler's values, their encoding, the event's frame), a frame each at most.
    var snapshotReservation: Int { 3 * self.maxReplyBytes }
    /// Bytes queued or reserved toward every connection.
    private(set) var totalQueuedBytes = 0
    /// Every uid with an open connection or bytes still counted; credential-less connections (tests) share `nil`.
    private(set) var accounts: [UInt32?: UIDAccount] = [:]
    /// The largest reply seen per `namespace.method`, at most ``maxEstimates`` of them.
    private var replyEstimates: [String: Int] = [:]
    /// Whether ``totalQueuedBytes`` went past a quarter of a uid's budget since memory was last given back.
    private var shouldTrim = false
    /// Called once the queued bytes of every uid are back to zero after a burst (e.g. gives memory back to the OS).
    var onDrainedAfterBurst: (() -> Void)?

    static let maxEstimates = 1024

    /// Budgets of `limits`; each byte limit is raised to at least two snapshot reservations (six frames), so
    /// that a connection woken at half its uid's budget always has room for one.
    init(limits: Limits, maxFrameLength: Int) {
        self.maxReplyBytes = maxFrameLength + 4
        var limits = limits
        let least = 6 * self.maxReplyBytes
        limits.queuedBytesPerUID = max(limits.queuedBytesPerUID, least)
        limits.totalQueuedBytes = max(limits.totalQueuedBytes, least)
        self.limits = limits
    }

    /// Budgets of the limits `configuration` sets.
    convenience init(_ configuration: ServerConfiguration) {
        self.init(
            limits: Limits(
                queuedBytesPerUID: configuration.uidQueuedBytes,
                requestsInFlightPerUID: configuration.uidRequestsInFlight,
                totalQueuedBytes: configuration.totalQueuedBytes
            ),
            maxFrameLength: configuration.maxFrameLength
        )
    }

    /// The account of `uid`, counting one more connection on it.
    func open(uid: UInt32?) -> UIDAccount {
        let account: UIDAccount
        if let existing = self.accounts[uid] {
            account = existing
        } else {
            account = UIDAccount(uid: uid, budgets: self)
            self.accounts[uid] = account
        }
        account.connections += 1
        return account
    }

    /// What to reserve for the reply to `method` before it is computed.
    func reservation(for method: String) -> Int {
        self.replyEstimates[method] ?? self.maxReplyBytes
    }

    /// Remembers that `method` gave a reply of `bytes` (the largest one is kept).
    func learn(_ method: String, replyBytes bytes: Int) {
        if let known = self.replyEstimates[method] {
            if bytes > known { self.replyEstimates[method] = bytes }
        } else if self.replyEstimates.count < Self.maxEstimates {
            self.replyEstimates[method] = bytes
        }
    }

    /// The gauges of each uid reported so far.
    private var gauges: [UInt32: [Gauge]] = [:]

    /// Sets the per-uid gauges (`mentoryd_uid_*`): one series per uid with an account, so the labels are bounded by
    /// the uids connected; the series of a uid gone since the last report are removed.
    func report(
        to factory: any MetricsFactory, subscriptions: [UInt32: Int], maxConnections: Int, maxSubscriptions: Int
    ) {
        let limits = [
            ("queued_bytes", self.limits.queuedBytesPerUID), ("requests_in_flight", self.limits.requestsInFlightPerUID),
            ("connections", maxConnections), ("subscriptions", maxSubscriptions),
            ("total_queued_bytes", self.limits.totalQueuedBytes),
        ]
        for (budget, limit) in limits {
            Gauge(label: MentoryMetric.uidBudgetLimits.name, dimensions: [("budget", budget)], factory: factory)
                .record(limit)
        }
        var gone = Set(self.gauges.keys)
        for (uid, account) in self.accounts {
            guard let uid else { continue }
            gone.remove(uid)
            let dimensions = [("uid", "\(uid)")]
            let gauges =
                self.gauges[uid]
                ?? [
                    MentoryMetric.uidQueuedBytes, MentoryMetric.uidRequestsInFlight, MentoryMetric.uidConnections,
                    MentoryMetric.uidSubscriptions,
                ].map { Gauge(label: $0.name, dimensions: dimensions, factory: factory) }
            self.gauges[uid] = gauges
            gauges[0].record(account.queuedBytes)
            gauges[1].record(account.requestsInFlight)
            gauges[2].record(account.connections)
            gauges[3].record(subscriptions[uid] ?? 0)
        }
        for uid in gone {
            for gauge in self.gauges.removeValue(forKey: uid) ?? [] { gauge.destroy() }
        }
    }

    fileprivate func charge(_ bytes: Int) {
        self.totalQueuedBytes += bytes
        if self.totalQueuedBytes > self.limits.queuedBytesPerUID / 4 { self.shouldTrim = true }
    }

    fileprivate func release(_ bytes: Int) {
        let before = self.totalQueuedBytes
        self.totalQueuedBytes -= bytes
        let half = self.limits.totalQueuedBytes / 2
        if before > half, self.totalQueuedBytes <= half {
            // Connections of any uid may have waited for the ceiling.
            for account in Array(self.accounts.values) { account.wakeWaiters() }
        }
        if self.totalQueuedBytes == 0, self.shouldTrim {
            self.shouldTrim = false
            self.onDrainedAfterBurst?()
        }
    }

    fileprivate func dropIfIdle(_ account: UIDAccount) {
        if account.isIdle, self.accounts[account.uid] === account { self.accounts[account.uid] = nil }
    }
}

/// One uid's share of ``UIDBudgets``: what its connections hold together. Confined to the server's event loop.
final class UIDAccount {
    /// The uid; `nil` for connections whose credentials are unknown (tests).
    let uid: UInt32?
    private let budgets: UIDBudgets
    /// Bytes queued toward this uid's connections, and reserved for replies and snapshots being computed.
    private(set) var queuedBytes = 0
    /// Requests in flight on this uid's connections.
    private(set) var requestsInFlight = 0
    /// This uid's open connections.
    fileprivate(set) var connections = 0
    /// Connections that stopped for want of room, to wake when there is some again.
    private var waiters: [Connection] = []

    fileprivate init(uid: UInt32?, budgets: UIDBudgets) {
        self.uid = uid
        self.budgets = budgets
    }

    fileprivate var isIdle: Bool { self.connections == 0 && self.queuedBytes == 0 && self.requestsInFlight == 0 }

    /// Whether this uid may take another request now.
    var hasRoom: Bool {
        self.queuedBytes < self.budgets.limits.queuedBytesPerUID
            && self.requestsInFlight < self.budgets.limits.requestsInFlightPerUID
            && self.budgets.totalQueuedBytes < self.budgets.limits.totalQueuedBytes
    }

    /// Whether `bytes` more fit this uid's budget and the ceiling; `ownReserved` of what is counted was reserved
    /// for exactly these bytes.
    func hasRoom(for bytes: Int, ownReserved: Int = 0) -> Bool {
        let extra = max(0, bytes - ownReserved)
        return self.queuedBytes + extra <= self.budgets.limits.queuedBytesPerUID
            && self.budgets.totalQueuedBytes + extra <= self.budgets.limits.totalQueuedBytes
    }

    /// Counts `bytes` more toward this uid (written, or reserved).
    func charge(_ bytes: Int) {
        self.queuedBytes += bytes
        self.budgets.charge(bytes)
    }

    /// Counts `bytes` out (taken by the kernel, or a reservation settled); wakes the waiting connections once
    /// this uid is back to half its budget.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        let before = self.queuedBytes
        self.queuedBytes -= bytes
        let half = self.budgets.limits.queuedBytesPerUID / 2
        if before > half, self.queuedBytes <= half { self.wakeWaiters() }
        self.budgets.release(bytes)
        if self.queuedBytes == 0 { self.budgets.dropIfIdle(self) }
    }

    /// Counts a request in flight.
    func requestStarted() {
        self.requestsInFlight += 1
    }

    /// Counts a request out; wakes the waiting connections once half the requests allowed are in flight.
    func requestFinished() {
        self.requestsInFlight -= 1
        if self.requestsInFlight == self.budgets.limits.requestsInFlightPerUID / 2 { self.wakeWaiters() }
        if self.requestsInFlight == 0 { self.budgets.dropIfIdle(self) }
    }

    /// A connection of this uid closed.
    func connectionClosed(_ connection: Connection) {
        self.connections -= 1
        self.waiters.removeAll { $0 === connection }
        self.budgets.dropIfIdle(self)
    }

    /// Wakes `connection` when there is room again; the connection asks once until woken.
    func wait(_ connection: Connection) {
        self.waiters.append(connection)
    }

    fileprivate func wakeWaiters() {
        guard !self.waiters.isEmpty else { return }
        // Taken out first: a connection woken that still finds no room waits again, in the next list.
        let woken = self.waiters
        self.waiters = []
        for connection in woken { connection.budgetFreed() }
    }
}
