import MentoryHandlerKit
import MentoryWire

/// Where a subscriber's events go: the transport seam between the engine and a connection.
///
/// The server implements it over a socket; tests implement it in memory.
public protocol EventSink: Sendable {
    /// Queues `event` for the subscriber.
    ///
    /// Returns `false`, without queueing, when the subscriber's bounded queue is full. The engine
    /// then stops sending that subscriber events and, once ``MentoryEngine/sinkDrained(_:)`` is
    /// called, sends a reset carrying the current state instead of what it skipped.
    func deliver(_ event: Mentory_V1_Event) -> Bool

    /// Queues a call forwarded to the plugin on this connection.
    ///
    /// Returns `false`, without queueing, when the connection's bounded outbound queue is full; the
    /// call then fails UNAVAILABLE. Connections that cannot carry plugin calls return `false`.
    func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool
}

extension EventSink {
    /// Sinks that carry no plugin calls refuse them.
    public func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool { false }
}
