// One import is enough for a handler: `import MentoryHandlerKit` also brings the names a handler's own
// code uses from the modules below it. Code generated from a handler's `.proto` imports what it needs.

// The protocol's messages (`Mentory_V1_Empty`, `Mentory_V1_ErrorCode`, …), its namespaces' schemas and
// the schema types generated code uses.
@_exported import MentoryWire
// The built-in domain's messages (`Mentory_V1_DiaryEntry`, …) and namespaces' schemas
// (`MentorySchema.Diary.list`, for `context.call`), and its rules (`ActionItems`, `CalendarDay`, `EntityID`).
@_exported import MentoryDomain
// The protocol of every generated message, for code generic over messages.
@_exported import protocol SwiftProtobuf.Message
// The type of `context.logger` and `call.logger`.
@_exported import struct Logging.Logger
