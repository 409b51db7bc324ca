#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire

/// A connection that asked for `session.monitor`: what it wants to see and how far it got.
struct Monitor {
    /// The topic its records arrive on.
    static let topic = "session.monitor"

    /// Only requests to these namespaces; empty: all.
    var namespaces: Set<String>
    /// Only events on these topics; empty: all.
    var topics: Set<String>
    /// The sequence number of the last record it was sent.
    var sequence: UInt64 = 0
    /// Records it missed since the last one it took.
    var missed: UInt64 = 0
}

extension MentoryEngine {
    /// Starts sending connection `id` a record of every answered request and published event.
    func startMonitor(_ id: ConnectionID, _ request: Mentory_V1_MonitorRequest) throws(MentoryError) {
        guard self.connections[id] != nil else { throw .handshakeRequired }
        self.observers.monitors[id] = Monitor(namespaces: Set(request.namespaces), topics: Set(request.topics))
        let peer = self.connections[id]?.context.credentials.map(\.description) ?? "an unknown peer"
        self.logger.notice("monitor started: connection \(id), \(peer)", metadata: ["connection": "\(id)"])
    }

    /// Tells every monitor about a call made on the client of connection `id`'s behalf: `chain` is the way it came
    /// (`streaks -> diary.list`); or, with `topic`, about the state of `topic` taken for subscriber `id`.
    func monitorCall(
        namespace: String, method: String, requestID: UInt64, code: UInt32, requestBytes: Int, replyBytes: Int,
        chain: String, from id: ConnectionID, started: ContinuousClock.Instant, topic: String = ""
    ) {
        guard let caller = self.connections[id]?.context else { return }
        var call = Mentory_V1_MonitorCall()
        call.connection = id.rawValue
        call.clientName = caller.clientName
        if let credentials = caller.credentials {
            call.uid = credentials.uid
            call.pid = credentials.pid
        }
        call.namespace = namespace
        call.method = method
        call.requestID = requestID
        call.code = code
        let latency = (ContinuousClock.now - started).components
        call.latencyUs = UInt64(latency.seconds) * 1_000_000 + UInt64(latency.attoseconds / 1_000_000_000_000)
        call.requestBytes = UInt32(clamping: requestBytes)
        call.replyBytes = UInt32(clamping: replyBytes)
        call.chain = chain
        call.topic = topic
        var record = Mentory_V1_MonitorRecord()
        record.unixMs = self.clock.nowUnixMilliseconds()
        record.call = call
        for (monitorID, monitor) in self.observers.monitors
        where monitorID != id && (monitor.namespaces.isEmpty || monitor.namespaces.contains(namespace)) {
            self.send(record, to: monitorID)
        }
    }

    /// Tells every monitor about `event`, a change of `bodyBytes` bytes published on a topic.
    func monitorEvent(_ event: SharedEvent, bodyBytes: Int) {
        var published = Mentory_V1_MonitorEvent()
        published.topic = event.topic
        published.sequence = event.sequence
        published.bytes = UInt32(clamping: bodyBytes)
        var record = Mentory_V1_MonitorRecord()
        record.unixMs = self.clock.nowUnixMilliseconds()
        record.event = published
        for (monitorID, monitor) in self.observers.monitors
        where monitor.topics.isEmpty || monitor.topics.contains(event.topic) {
            self.send(record, to: monitorID)
        }
    }

    /// Sends one record to a monitor, preceded by how many it missed; a full queue drops the record
    /// (and counts it) rather than wait: a monitor never slows the daemon or anyone else.
    private func send(_ record: Mentory_V1_MonitorRecord, to id: ConnectionID) {
        guard var monitor = self.observers.monitors[id], let connection = self.connections[id] else { return }
        defer { self.observers.monitors[id] = monitor }
        if monitor.missed > 0 {
            var gap = Mentory_V1_MonitorRecord()
            gap.unixMs = record.unixMs
            gap.missed = monitor.missed
            guard self.deliverRecord(gap, to: connection.sink, monitor: &monitor) else {
                monitor.missed += 1
                return
            }
            monitor.missed = 0
        }
        if !self.deliverRecord(record, to: connection.sink, monitor: &monitor) {
            monitor.missed += 1
        }
    }

    private func deliverRecord(_ record: Mentory_V1_MonitorRecord, to sink: any EventSink, monitor: inout Monitor)
        -> Bool
    {
        var event = Mentory_V1_Event()
        event.topic = Monitor.topic
        event.kind = .change
        event.sequence = monitor.sequence + 1
        event.epoch = self.epoch
        event.body = record.wireBody()
        guard sink.deliver(SharedEvent(event)) else { return false }
        monitor.sequence += 1
        return true
    }
}
