// One import is enough for a client or a Swift plugin: `import MentoryClient` also brings the protocol's
// messages and schemas. Code generated from a plugin's `.proto` imports what it needs.

// The protocol's messages (`Mentory_V1_Welcome`, `Mentory_V1_ErrorCode`, …), its namespaces' schemas and
// the schema types generated code uses.
@_exported import MentoryWire
// The built-in domain's messages (`Mentory_V1_DiaryEntry`, …) and namespaces' schemas (`MentorySchema.Diary.list`).
@_exported import MentoryDomain
// The protocol of every generated message, for code generic over messages.
@_exported import protocol SwiftProtobuf.Message
