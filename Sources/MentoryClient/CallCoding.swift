#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire
import SwiftProtobuf

/// How a call becomes a request and its reply a message, for both clients (``MentoryClient`` and
/// ``BlockingMentoryConnection``): one rule for the deadline the daemon is told, one wording for
/// messages that cannot be encoded or decoded.
enum CallCoding {
    /// The request for `namespace.method`. With a timeout, the daemon is told when the answer stops being
    /// useful, in whole milliseconds and at least 1: it fails the call with DEADLINE_EXCEEDED then (a
    /// plugin call, a handler that checks its deadline) rather than working for a caller that has gone.
    static func request(
        id: UInt64, namespace: String, method: String, body: Data, timeoutNanoseconds: Int64?
    ) -> Mentory_V1_Request {
        var request = Mentory_V1_Request()
        request.id = id
        request.namespace = namespace
        request.method = method
        request.body = body
        if let timeoutNanoseconds {
            request.timeoutMs = UInt32(clamping: max(1, timeoutNanoseconds / 1_000_000))
        }
        return request
    }

    /// `request` serialized as a call's body.
    static func body(of request: some SwiftProtobuf.Message) throws(MentoryClientError) -> Data {
        do {
            return try request.serializedData()
        } catch {
            throw .malformedReply("cannot serialize the request: \(error)")
        }
    }

    /// A reply body decoded as `Reply`.
    static func reply<Reply: SwiftProtobuf.Message>(_ body: Data, as: Reply.Type) throws(MentoryClientError) -> Reply {
        do {
            return try Reply(serializedBytes: body)
        } catch {
            throw .malformedReply("the reply is not a \(Reply.protoMessageName): \(error)")
        }
    }
}
