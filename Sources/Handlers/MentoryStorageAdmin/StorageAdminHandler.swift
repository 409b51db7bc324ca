#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryEngine
import MentoryWire

/// A store that can copy itself while it serves.
public protocol StorageBackupTarget: Sendable {
    /// Writes a consistent copy of the store to `destination`, an absolute path that must not exist.
    func writeBackup(to destination: String) async throws(MentoryError) -> Mentory_V1_StorageBackupReply
}

/// Serves the `storage` namespace: administration of the daemon's durable store.
///
/// `backup` writes a consistent copy of the database while the daemon keeps serving other
/// requests. Because the daemon writes the file with its own rights, a peer whose credentials are
/// known must run as the daemon's user or as root; anyone else gets
/// ``MentoryError/permissionDenied(namespace:method:)``. The copy never overwrites a file.
public struct StorageAdminHandler: MentoryHandler {
    /// The namespace this handler serves.
    public static let namespace = "storage"

    /// The methods of the `storage` namespace.
    public enum Method: String, CaseIterable, Sendable {
        case backup
    }

    private let target: any StorageBackupTarget
    private let ownerUID: UInt32

    /// Creates the handler over `target`; `ownerUID` is the user whose peers may call it (besides root).
    public init(target: any StorageBackupTarget, ownerUID: UInt32 = geteuid()) {
        self.target = target
        self.ownerUID = ownerUID
    }

    public var namespace: String { Self.namespace }
    public var methods: [String] { Method.allCases.map(\.rawValue) }

    public func handle(_ call: HandlerCall, engine: isolated MentoryEngine) async throws(MentoryError) -> Data {
        guard let method = Method(rawValue: call.method) else {
            throw .unknownMethod(namespace: self.namespace, method: call.method)
        }
        switch method {
        case .backup:
            // The socket's permissions decide who may connect at all; when the kernel told who the
            // peer is, only the daemon's own user and root may make the daemon write a file.
            if let peer = call.connection.credentials, peer.uid != 0, peer.uid != self.ownerUID {
                throw .permissionDenied(namespace: self.namespace, method: call.method)
            }
            let request = try call.decode(Mentory_V1_StorageBackupRequest.self)
            guard !request.destination.isEmpty else {
                throw .invalidArgument("name the backup's destination, an absolute path that does not exist yet")
            }
            let reply = try await self.target.writeBackup(to: request.destination)
            engine.logger.notice(
                "backup written",
                metadata: [
                    "path": "\(reply.destination)", "bytes": "\(reply.bytes)", "entries": "\(reply.diaryEntries)",
                ]
            )
            return reply.wireBody()
        }
    }
}
