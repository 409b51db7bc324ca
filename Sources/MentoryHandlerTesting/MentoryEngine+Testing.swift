import MentoryEngine
import MentoryHandlerKit
import MentoryWire

extension MentoryEngine {
    /// Answers `request` as the server does (``respond(to:from:received:queued:)``), waiting for a suspended one;
    /// the bodies are copied. For tests, not the daemon: ``HandlerTestHarness`` calls through it, and so do the
    /// engine's own tests.
    package func respond(to request: Mentory_V1_Request, from id: ConnectionID) async -> Mentory_V1_Response {
        switch self.respond(to: InboundRequest(request), from: id, received: .now) {
        case .answered(let response): return response.wireResponse
        case .suspended(let task, _): return await task.value.wireResponse
        }
    }
}

extension BackgroundJobs {
    /// Runs these jobs in a task of their own until ``stop()``: what tests do in place of the daemon's
    /// service (an engine whose jobs nobody runs refuses every job, loudly). For tests, not the daemon.
    package func runForTesting() {
        self.expectRunner()
        Task.detached { await self.run() }
    }
}
