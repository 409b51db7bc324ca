import CMentoryShims
import Foundation
import MentoryEngine
import NIOCore

/// Reads a connection's peer credentials with `SO_PEERCRED`, through NIO's socket-option provider.
enum PeerCredentialsReader {
    /// The peer's pid, uid, primary gid and supplementary groups, or `nil` if the socket cannot tell.
    static func read(_ channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let future: EventLoopFuture<mentory_ucred> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET),
            name: NIOBSDSocket.Option(rawValue: mentory_so_peercred())
        )
        return future.map { credentials in
            PeerCredentials(
                pid: credentials.pid,
                uid: credentials.uid,
                gid: credentials.gid,
                groups: Self.supplementaryGroups(of: credentials.pid)
            )
        }.recover { _ in nil }
    }

    /// The supplementary groups listed in `/proc/PID/status`; empty when they cannot be read.
    static func supplementaryGroups(of pid: Int32) -> [UInt32] {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            return []
        }
        for line in status.split(separator: "\n") where line.hasPrefix("Groups:") {
            return line.dropFirst("Groups:".count).split(whereSeparator: \.isWhitespace).compactMap { UInt32($0) }
        }
        return []
    }
}
