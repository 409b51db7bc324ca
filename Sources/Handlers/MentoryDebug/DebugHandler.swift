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
import MentoryEngine
import MentoryWire
import SwiftProtobuf

/// Serves the `debug` namespace: fault injection for testing how mentoryd fails.
///
/// Never register it in production. mentoryd registers it only when the configuration sets
/// `debug.faultInjection` to `true`, and every method answers only a peer whose credentials say
/// it is root (uid 0).
///
/// - `freezeEngine` (body `google.protobuf.UInt32Value`, seconds): blocks the engine's executor
///   for that long. With mentoryd's engine running on the event loop, nothing is served meanwhile
///   and the liveness probe behind `WATCHDOG=1` stalls, so systemd's watchdog fires.
public struct DebugHandler: MentoryHandler {
    /// The namespace this handler serves.
    public static let namespace = "debug"

    /// The methods of the `debug` namespace.
    public enum Method: String, CaseIterable, Sendable {
        case freezeEngine
    }

    /// The longest freeze accepted, in seconds.
    public static let maxFreezeSeconds: UInt32 = 600

    /// The fault-injection handler; register it only when `debug.faultInjection` is on.
    public init() {}

    public var namespace: String { Self.namespace }
    public var methods: [String] { Method.allCases.map(\.rawValue) }

    public func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        guard let method = Method(rawValue: call.method) else {
            throw .unknownMethod(namespace: self.namespace, method: call.method)
        }
        guard call.connection.credentials?.uid == 0 else {
            engine.logger.warning(
                "refused a fault-injection request from a peer that is not root",
                metadata: [
                    "method": "\(call.method)",
                    "uid": "\(call.connection.credentials.map { String($0.uid) } ?? "unknown")",
                ]
            )
            throw .permissionDenied(namespace: self.namespace, method: call.method)
        }
        switch method {
        case .freezeEngine:
            let seconds = try call.decode(Google_Protobuf_UInt32Value.self).value
            guard (1...Self.maxFreezeSeconds).contains(seconds) else {
                throw .invalidArgument("freezeEngine takes 1 to \(Self.maxFreezeSeconds) seconds, not \(seconds)")
            }
            engine.logger.warning(
                "fault injection: freezing the engine's executor",
                metadata: ["seconds": "\(seconds)", "connection": "\(call.connection.id)"]
            )
            Self.blockThread(seconds: seconds)
            engine.logger.notice("fault injection: the engine's executor runs again")
            return Mentory_V1_Empty().wireBody()
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
