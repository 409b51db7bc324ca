import Logging
import MentoryEngine
import MentoryHandlerKit
import NIOCore

/// What a connection logs, by name, so that its handler reads as what it does.
extension Logger {
    /// Logs why a subscriber gets a reset instead of `shared`: it would not fit in a frame.
    func eventTooLarge(_ shared: SharedEvent, maxFrameLength: Int) {
        self.error(
            """
            event too large for a frame; the subscriber gets a reset instead: \(shared.topic) \(shared.kind) of \
            \(shared.payloadLength) bytes, over limits.maxFrameLength (\(maxFrameLength))
            """,
            metadata: [
                "topic": "\(shared.topic)", "kind": "\(shared.kind)", "bytes": "\(shared.payloadLength)",
                "maxFrameLength": "\(maxFrameLength)",
            ]
        )
    }

    /// Logs that a connection waits for its uid's `account` to have room.
    func waitsForBudget(_ account: UIDAccount) {
        self.debug(
            "uid over its budget; this connection waits for room",
            metadata: [
                "uidQueuedBytes": "\(account.queuedBytes)", "uidRequestsInFlight": "\(account.requestsInFlight)",
            ]
        )
    }

    /// Logs that a connection stopped reading at its outbound bound.
    func outboundBoundReached(_ outboundBytes: Int) {
        self.debug(
            "outbound bound reached; no longer reading this connection",
            metadata: ["outboundBytes": "\(outboundBytes)"]
        )
    }
}
