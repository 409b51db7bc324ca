import MentoryWire
import SwiftProtobuf

/// A message serialized once, ready to go out as a reply: what ``HandlerContext/publish(_:on:)`` returns.
///
/// A route that answers with the change it has just published returns this instead of the message, so that the
/// change is serialized once, for the event and the reply:
///
/// ```swift
/// routes.on(Namespace.set) { request, _, context in
///     context.state.current = try Self.updated(context.state.current, with: request)
///     return context.publish(context.state.current, on: Namespace.changes)
/// }
/// ```
///
/// Any route may answer with one (``init(_:)`` serializes a message), and a handler may keep one to answer
/// with again: its bytes are never written to in place while another holder shares them.
public struct Serialized<Message: SwiftProtobuf.Message>: Sendable {
    /// The message's bytes, with room in front for a response frame's headers.
    @usableFromInline
    package let bytes: ProtobufBuffer

    /// Serializes `message`.
    @inlinable
    public init(_ message: Message) {
        self.bytes = message.replyBody()
    }

    /// The bytes of a message already serialized.
    package init(serialized bytes: ProtobufBuffer) {
        self.bytes = bytes
    }

    /// The message, decoded again from its bytes.
    public func decoded() throws -> Message {
        try Message(serializedBytes: self.bytes)
    }
}
