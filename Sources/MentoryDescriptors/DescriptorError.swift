/// Why building a ``DescriptorPool`` or transcoding a message failed.
///
/// ``kind`` is for programs; ``message`` is a sentence for people, naming the message, the field
/// and what was expected, e.g. `unknown field 'titel' in mentory.v1.DiaryAddRequest; known fields: ...`.
public struct DescriptorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of failure.
    public enum Kind: Sendable, Equatable {
        /// The descriptor set is inconsistent (a duplicate name, a type that is not defined, ...).
        case invalidDescriptors
        /// No message of the requested name is in the pool.
        case unknownMessage
        /// The protobuf binary input is not a valid encoding of the message.
        case malformedBinary
        /// The JSON input is not valid JSON.
        case malformedJSON
        /// The JSON input names a field the message does not have.
        case unknownField
        /// A JSON value does not fit its field (wrong type, out of range, unknown enum name, ...).
        case invalidValue
        /// The input exceeds a ``TranscodingLimits`` bound (size or nesting depth).
        case limitExceeded
    }

    /// The class of failure.
    public let kind: Kind
    /// What went wrong and, where it helps, what is accepted instead.
    public let message: String

    /// Makes an error; the transcoder does this.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { self.message }
}
