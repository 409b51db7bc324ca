#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import NIOCore
import SwiftProtobuf

/// A payload that is not a valid `Envelope`.
public struct MalformedMessageError: Error, Sendable, CustomStringConvertible {
    /// What the protobuf decoder reported.
    public var reason: String

    public init(reason: String) {
        self.reason = reason
    }

    public var description: String { "malformed message: \(self.reason)" }
}

extension Mentory_V1_Envelope {
    /// Decodes an envelope from one frame's payload.
    public init(frame: ByteBuffer) throws(MalformedMessageError) {
        do {
            self = try frame.withUnsafeReadableBytes { pointer in
                try Mentory_V1_Envelope(serializedBytes: Array(pointer))
            }
        } catch {
            throw MalformedMessageError(reason: "\(error)")
        }
        if self.kind == nil {
            throw MalformedMessageError(reason: "the envelope carries no message")
        }
    }
}

extension ByteBuffer {
    /// Appends `envelope` as one frame: its length as a 4-byte big-endian integer, then its bytes.
    public mutating func writeFrame(_ envelope: Mentory_V1_Envelope) {
        // Serializing a message built in memory cannot fail: it has no required fields.
        let bytes: [UInt8] = (try? envelope.serializedBytes()) ?? []
        self.reserveCapacity(minimumWritableBytes: WireProtocol.lengthPrefixSize + bytes.count)
        self.writeInteger(UInt32(bytes.count))
        self.writeBytes(bytes)
    }
}

/// Encodes outbound envelopes as length-prefixed frames.
public struct EnvelopeFrameEncoder: MessageToByteEncoder, Sendable {
    public typealias OutboundIn = Mentory_V1_Envelope

    public init() {}

    public func encode(data: Mentory_V1_Envelope, out: inout ByteBuffer) {
        out.writeFrame(data)
    }
}

extension Mentory_V1_Error {
    /// Creates a wire error from a stable code and a message.
    public init(code: Mentory_V1_ErrorCode, message: String) {
        self.init()
        self.code = UInt32(code.rawValue)
        self.message = message
    }
}

extension Mentory_V1_Response {
    /// A successful response carrying a serialized reply body.
    public static func success(id: UInt64, body: Data) -> Self {
        var response = Self()
        response.id = id
        response.body = body
        return response
    }

    /// A failed response.
    public static func failure(id: UInt64, error: Mentory_V1_Error) -> Self {
        var response = Self()
        response.id = id
        response.error = error
        return response
    }
}
