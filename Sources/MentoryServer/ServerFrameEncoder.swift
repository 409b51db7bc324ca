import Logging
import MentoryWire
import NIOCore

/// A frame the server refused to send because its payload is over the announced `max_frame_length`.
struct OversizedFrame: Error {
    /// The payload's size in bytes (or the body's alone, when that is already over the limit).
    var length: Int
    /// The announced limit in bytes.
    var maximum: Int
}

/// Encodes the server's envelopes as length-prefixed frames, never over the announced frame limit.
enum ServerFrameEncoder {
    private static let allocator = ByteBufferAllocator()

    /// The envelope as one frame, or ``OversizedFrame`` if its payload exceeds `maxFrameLength`.
    static func encode(_ envelope: Mentory_V1_Envelope, maxFrameLength: Int) -> Result<ByteBuffer, OversizedFrame> {
        // A body over the limit makes the frame over the limit: refuse it without serializing megabytes.
        let bodyLength =
            switch envelope.kind {
            case .response(let response): response.body.count
            case .event(let event): event.body.count
            default: 0
            }
        guard bodyLength <= maxFrameLength else {
            return .failure(OversizedFrame(length: bodyLength, maximum: maxFrameLength))
        }
        // Serializing a message built in memory cannot fail: it has no required fields.
        let bytes: [UInt8] = (try? envelope.serializedBytes()) ?? []
        guard bytes.count <= maxFrameLength else {
            return .failure(OversizedFrame(length: bytes.count, maximum: maxFrameLength))
        }
        var buffer = Self.allocator.buffer(capacity: WireProtocol.lengthPrefixSize + bytes.count)
        buffer.writeInteger(UInt32(bytes.count))
        buffer.writeBytes(bytes)
        return .success(buffer)
    }

    /// The response as one frame, or ``OversizedFrame`` if its payload exceeds `maxFrameLength`.
    ///
    /// A reply's body is taken out of `response` and framed where it was serialized: its headers go into the
    /// room left in front of it (``ProtobufBuffer/responseFrame(id:)``), so it is not copied as long as
    /// `response` held the only reference to it. An error response is encoded as any other envelope.
    static func encode(_ response: inout OutboundResponse, maxFrameLength: Int) -> Result<ByteBuffer, OversizedFrame> {
        guard let body = response.takeBody() else {
            var envelope = Mentory_V1_Envelope()
            envelope.response = response.wireResponse
            return Self.encode(envelope, maxFrameLength: maxFrameLength)
        }
        // The same checks, with the same figures, as for an envelope: the body alone, then the whole payload.
        guard body.count <= maxFrameLength else {
            return .failure(OversizedFrame(length: body.count, maximum: maxFrameLength))
        }
        let payloadLength = body.responsePayloadLength(id: response.id)
        guard payloadLength <= maxFrameLength else {
            return .failure(OversizedFrame(length: payloadLength, maximum: maxFrameLength))
        }
        return .success((consume body).responseFrame(id: response.id))
    }

    /// Encodes a small server message (an error response or connection error), shortening its error
    /// message until it fits when the frame limit is very small.
    static func encodeBounded(_ envelope: Mentory_V1_Envelope, maxFrameLength: Int) -> ByteBuffer {
        var envelope = envelope
        while true {
            switch Self.encode(envelope, maxFrameLength: maxFrameLength) {
            case .success(let frame):
                return frame
            case .failure(let oversized):
                let excess = oversized.length - oversized.maximum
                switch envelope.kind {
                case .response(var response) where !response.error.message.isEmpty:
                    response.error.message = Self.shortened(response.error.message, by: excess)
                    envelope.response = response
                case .connectionError(var connectionError) where !connectionError.error.message.isEmpty:
                    connectionError.error.message = Self.shortened(connectionError.error.message, by: excess)
                    envelope.connectionError = connectionError
                default:
                    // Nothing left to shorten: an empty frame still tells the peer something is wrong
                    // without breaking the limit.
                    var buffer = Self.allocator.buffer(capacity: WireProtocol.lengthPrefixSize)
                    buffer.writeInteger(UInt32(0))
                    return buffer
                }
            }
        }
    }

    /// A closing or non-closing `ConnectionError` frame carrying `error`.
    static func connectionErrorFrame(_ error: MentoryError, closing: Bool, maxFrameLength: Int) -> ByteBuffer {
        var connectionError = Mentory_V1_ConnectionError()
        connectionError.error = error.wireError
        connectionError.closing = closing
        var envelope = Mentory_V1_Envelope()
        envelope.connectionError = connectionError
        return Self.encodeBounded(envelope, maxFrameLength: maxFrameLength)
    }

    /// The Welcome as one frame, or the error to close the connection with when it is over the frame limit.
    static func welcomeFrame(_ welcome: Mentory_V1_Welcome, maxFrameLength: Int) -> Result<ByteBuffer, MentoryError> {
        var envelope = Mentory_V1_Envelope()
        envelope.welcome = welcome
        return Self.encode(envelope, maxFrameLength: maxFrameLength).mapError { oversized in
            .internal(
                "the Welcome is \(oversized.length) bytes, over the frame limit of \(oversized.maximum) bytes;"
                    + " raise limits.maxFrameLength")
        }
    }

    /// The plugin call as one frame; `nil` when it is over the frame limit.
    static func pluginCallFrame(_ pluginCall: Mentory_V1_PluginCall, maxFrameLength: Int) -> ByteBuffer? {
        var envelope = Mentory_V1_Envelope()
        envelope.pluginCall = pluginCall
        return try? Self.encode(envelope, maxFrameLength: maxFrameLength).get()
    }

    /// The error response sent instead of the reply to request `id` (of `method`) that is over the frame limit,
    /// logging why.
    static func oversizedReplyFrame(_ id: UInt64, method: String, _ oversized: OversizedFrame, logger: Logger)
        -> ByteBuffer
    {
        let message =
            "the reply to \(method) is \(oversized.length) bytes, over the frame limit of \(oversized.maximum)"
            + " bytes; the handler must page its replies"
        logger.error(
            "reply too large for a frame; sent an error instead: \(message)",
            metadata: [
                "method": "\(method)", "bytes": "\(oversized.length)", "maxFrameLength": "\(oversized.maximum)",
            ]
        )
        var replacement = Mentory_V1_Envelope()
        replacement.response = .failure(id: id, error: MentoryError.internal(message).wireError)
        return Self.encodeBounded(replacement, maxFrameLength: oversized.maximum)
    }

    private static func shortened(_ message: String, by excess: Int) -> String {
        String(decoding: message.utf8.dropLast(max(excess, 1)), as: UTF8.self)
    }
}
