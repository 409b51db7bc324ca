import MentoryEngine
import MentoryWire
import NIOCore

/// Delivers a subscriber's events into its connection.
///
/// The channel's write buffer is the subscriber's bounded queue: once more than
/// ``ServerConfiguration/subscriberQueueBytes`` are waiting for the socket, the channel stops
/// being writable and events are refused, so the engine falls back to a reset.
struct ChannelEventSink: EventSink {
    let channel: any Channel

    func deliver(_ event: Mentory_V1_Event) -> Bool {
        guard self.channel.isWritable, self.channel.isActive else { return false }
        var envelope = Mentory_V1_Envelope()
        envelope.event = event
        self.channel.writeAndFlush(envelope, promise: nil)
        return true
    }
}
