import MentoryHandlerKit
import MentoryWire
import NIOCore
import SwiftProtobuf

/// Where a connection's answers and events go: the transport seam between the engine and a connection.
///
/// The server implements it over a socket; tests implement it in memory.
///
/// Class-bound: the engine keeps one sink per subscription and calls it for every event delivered, and a class
/// existential is copied with a retain, where any other costs a call through the value's witness table.
public protocol EventSink: AnyObject, Sendable {
    /// Sends the response to a request that was answered by a task
    /// (``MentoryEngine/RequestOutcome/suspended(_:)``).
    ///
    /// Called exactly once per such request, even after the connection detached, so that what the
    /// connection reserved for the reply can be released.
    func answer(_ response: consuming OutboundResponse)

    /// Queues `event` for the subscriber.
    ///
    /// Returns `false`, without queueing, when the subscriber's bounded queue is full. The engine
    /// then stops sending that subscriber events and, once ``MentoryEngine/sinkDrained(_:)`` is
    /// called, sends a reset carrying the current state instead of what it skipped.
    func deliver(_ event: SharedEvent) -> Bool

    /// Queues a call forwarded to the plugin on this connection.
    ///
    /// Returns `false`, without queueing, when the connection's bounded outbound queue is full; the
    /// call then fails UNAVAILABLE. Connections that cannot carry plugin calls return `false`.
    func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool

    /// Counts a call that a handler or plugin makes on behalf of this connection's client (`HandlerContext.call`,
    /// `plugin.call`) against that client's budget, as one more of its requests in flight.
    ///
    /// Returns `false`, counting nothing, when the client is at its budget; the nested call then fails
    /// `MentoryError.callerOverBudget` rather than waiting (the call making it holds room already,
    /// so waiting could wait for itself). Every `true` is followed by one ``finishCallOnBehalf()``.
    func startCallOnBehalf() -> Bool

    /// Counts out a call ``startCallOnBehalf()`` counted.
    func finishCallOnBehalf()

    /// Closes the connection, telling its peer why with a closing `ConnectionError`: the engine stops serving
    /// what the connection registered (a plugin no longer declared), or wants it to register again.
    func close(because error: MentoryError)
}

extension EventSink {
    /// Sinks that carry no plugin calls refuse them.
    public func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool { false }
    /// Sinks without a budget take every call made on their client's behalf.
    public func startCallOnBehalf() -> Bool { true }
    /// Sinks without a budget count nothing.
    public func finishCallOnBehalf() {}
    /// Sinks without a connection of their own have nothing to close.
    public func close(because error: MentoryError) {}
}

/// An event as the engine hands it to its subscribers: the frame that carries it, encoded once however many
/// subscribers there are, and the fields the engine and connections route it by.
///
/// `frame` shares one storage among every subscriber's copy (`ByteBuffer` is copy-on-write and
/// writing it does not change it), so fan-out costs no encoding and no copy per subscriber. A topic's ring keeps
/// its changes as these (``EventLog``), so that a replay sends the frames published, encoding nothing again.
public struct SharedEvent: Sendable {
    /// The topic the event is on.
    public let topic: String
    /// What the event is: a change, or a subscriber's own snapshot or reset.
    public let kind: Mentory_V1_EventKind
    /// The event's sequence number on its topic.
    public let sequence: UInt64
    /// The event as one length-prefixed frame holding an `Envelope`.
    public let frame: ByteBuffer

    /// Encodes `event` into its frame (``NIOCore/ByteBuffer/writeEventFrame(_:)``: by hand, not through
    /// SwiftProtobuf, as this is paid once per publish).
    public init(_ event: Mentory_V1_Event) {
        self.topic = event.topic
        self.kind = event.kind
        self.sequence = event.sequence
        var frame = ByteBuffer()
        frame.writeEventFrame(event)
        self.frame = frame
    }

    /// A change of `body` on `topic`, numbered `sequence`, in `epoch`, with no `Event` message made: framed where
    /// `body` is when it can be (``MentoryWire/ProtobufBuffer/changeEventFrame(topic:sequence:epoch:)``: a publish
    /// then allocates and copies nothing more), else copied into a frame of its own. `body` stays the same bytes,
    /// sharing the frame's storage when it was framed in place.
    init(change body: inout ProtobufBuffer, topic: String, sequence: UInt64, epoch: UInt64) {
        if let frame = body.changeEventFrame(topic: topic, sequence: sequence, epoch: epoch) {
            self.init(topic: topic, kind: .change, sequence: sequence, frame: frame)
            return
        }
        var frame = ByteBuffer()
        body.withUnsafeBytes { body in
            frame.writeEventFrame(topic: topic, sequence: sequence, kind: .change, body: body, epoch: epoch)
        }
        self.init(topic: topic, kind: .change, sequence: sequence, frame: frame)
    }

    private init(topic: String, kind: Mentory_V1_EventKind, sequence: UInt64, frame: ByteBuffer) {
        self.topic = topic
        self.kind = kind
        self.sequence = sequence
        self.frame = frame
    }

    /// The event as a message, decoded from its frame (for tests and logs: the engine routes by the fields).
    public var event: Mentory_V1_Event {
        let payload = self.frame.getSlice(
            at: self.frame.readerIndex + WireProtocol.lengthPrefixSize, length: self.payloadLength)
        // The frame was encoded here from a valid event, so it decodes.
        return (try? Mentory_V1_Envelope(serializedBytes: ProtobufBuffer(payload ?? ByteBuffer())))?.event
            ?? Mentory_V1_Event()
    }

    /// The frame's payload size, which the connection checks against its frame limit.
    public var payloadLength: Int { self.frame.readableBytes - WireProtocol.lengthPrefixSize }
}
