import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// Delivers a subscriber's events into its connection.
///
/// The connection's outbound bytes are the subscriber's bounded queue: replies and events count
/// together, and once an event would take them past ``ServerConfiguration/subscriberQueueBytes`` (or
/// the event would not fit in one frame) it is refused, so the engine falls back to a reset once the
/// queue has drained to half.
///
/// A class, so that the engine's copies of it (one per subscription) are one reference each: copying or
/// calling it per delivered event costs a retain, not a copy of the connection and its event loop.
final class ConnectionEventSink: EventSink {
    let connection: NIOLoopBound<Connection>

    init(connection: NIOLoopBound<Connection>) {
        self.connection = connection
    }

    func answer(_ response: consuming OutboundResponse) {
        self.connection.value.finish(response)
    }

    func deliver(_ event: SharedEvent) -> Bool {
        self.connection.value.deliver(event)
    }

    func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool {
        self.connection.value.deliver(pluginCall: pluginCall)
    }

    /// Counts a call a handler or plugin makes on this connection's client's behalf as one more request of its
    /// uid's, if the uid has room; it does not wait for room.
    func startCallOnBehalf() -> Bool {
        let account = self.connection.value.account
        guard account.hasRoom else { return false }
        account.requestStarted()
        return true
    }

    /// Counts out a call ``startCallOnBehalf()`` counted; may wake the uid's waiting connections.
    func finishCallOnBehalf() {
        self.connection.value.account.requestFinished()
    }

    func close(because error: MentoryError) {
        self.connection.value.failConnection(error)
    }
}
