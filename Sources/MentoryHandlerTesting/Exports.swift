// A handler's tests need one import besides the handler's module: `import MentoryHandlerTesting` also
// brings the handler SDK, and with it the protocol's messages and schemas.
@_exported import MentoryHandlerKit
