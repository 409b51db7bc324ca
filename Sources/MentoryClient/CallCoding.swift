#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire
import SwiftProtobuf

/// How a call's message becomes a body and its reply body a message, for both clients (``MentoryClient`` and
/// ``BlockingMentoryConnection``): one wording for messages that cannot be encoded or decoded. The request
/// around the body is ``ClientProtocolCore``'s.
enum CallCoding {
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
