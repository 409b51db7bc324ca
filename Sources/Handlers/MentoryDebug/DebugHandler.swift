#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryHandlerKit
import MentoryWire
import SwiftProtobuf

/// Serves the `debug` namespace: fault injection for testing how mentoryd fails.
///
/// Never register it in production. mentoryd registers it only when the configuration sets
/// `debug.faultInjection` to `true`, and every method answers only a peer whose credentials say
/// it is root (uid 0): mentory.proto declares them with `(privilege) = PRIVILEGE_ROOT`, and the
/// engine refuses anyone else, whatever `access.rules` says, before the handler runs.
///
/// - `freezeEngine` (body `google.protobuf.UInt32Value`, seconds): blocks the engine's executor
///   for that long. With mentoryd's engine running on the event loop, nothing is served meanwhile
///   and the liveness probe behind `WATCHDOG=1` stalls, so systemd's watchdog fires.
public struct DebugHandler: MentoryHandler {
    public typealias Namespace = MentorySchema.Debug

    /// The longest freeze accepted, in seconds.
    public static let maxFreezeSeconds: UInt32 = 600

    /// The fault-injection handler; register it only when `debug.faultInjection` is on.
    public init() {}

    public func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.freezeEngine) { request, call, _ in
            let seconds = request.value
            guard (1...Self.maxFreezeSeconds).contains(seconds) else {
                throw MentoryError.invalidArgument(
                    "freezeEngine takes 1 to \(Self.maxFreezeSeconds) seconds, not \(seconds)")
            }
            call.logger.warning("fault injection: freezing the engine's executor", metadata: ["seconds": "\(seconds)"])
            Self.blockThread(seconds: seconds)
            call.logger.notice("fault injection: the engine's executor runs again")
            return Mentory_V1_Empty()
        }
    }

    /// Blocks the calling thread (on purpose: it is the engine's executor) for `seconds`.
    private static func blockThread(seconds: UInt32) {
        var request = timespec(tv_sec: Int(seconds), tv_nsec: 0)
        var remaining = timespec()
        while nanosleep(&request, &remaining) != 0, errno == EINTR {
            request = remaining
        }
    }
}
