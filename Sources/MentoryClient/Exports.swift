// One import is enough for a client or a Swift plugin: `import MentoryClient` also brings the protocol's
// messages and schemas. Code generated from a plugin's `.proto` imports what it needs.

// The protocol's messages (`Mentory_V1_DiaryEntry`, `Mentory_V1_ErrorCode`, …), the built-in namespaces'
// schemas (`MentorySchema.Diary.list`) and the schema types generated code uses.
@_exported import MentoryWire
// The protocol of every generated message, for code generic over messages.
@_exported import protocol SwiftProtobuf.Message
