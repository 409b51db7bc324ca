import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryWire
import Testing

/// Calls `method` with `request`, which must fail, and returns the failure's wire code
/// (`nil`, recorded as an issue, when the call succeeds or fails with an error that has no code).
func failure<Handler: MentoryHandler, Request, Reply>(
    _ harness: HandlerTestHarness<Handler>,
    _ method: MethodSchema<Handler.Namespace, Request, Reply>,
    _ request: Request
) async -> Mentory_V1_ErrorCode? {
    do {
        _ = try await harness.call(method, request)
        Issue.record("\(method.namespace).\(method.name) unexpectedly succeeded")
        return nil
    } catch let error as MentoryError {
        #expect(!error.message.isEmpty)
        return error.code
    } catch let error as any HandlerError {
        #expect(!error.message.isEmpty)
        return error.code
    } catch {
        Issue.record("\(method.namespace).\(method.name) failed with \(error), which has no wire code")
        return nil
    }
}
