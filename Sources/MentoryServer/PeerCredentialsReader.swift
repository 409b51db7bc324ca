import CMentoryShims
import Logging
import MentoryEngine
import MentoryHandlerKit
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Why a connection's peer credentials could not be read; the connection is then refused.
struct PeerCredentialsError: Error, CustomStringConvertible {
    /// What the kernel reported for `SO_PEERCRED`.
    var underlying: any Error

    var description: String { "cannot read the peer's credentials (SO_PEERCRED): \(self.underlying)" }
}

/// Reads a connection's peer credentials with `SO_PEERCRED` and `SO_PEERGROUPS`, through NIO's
/// socket-option provider: two `getsockopt` calls, no file system access on the event loop.
enum PeerCredentialsReader {
    /// A zero-length option buffer: `SO_PEERGROUPS` into it succeeds only when the peer has no groups.
    private struct NoGroups: Sendable {}

    /// Whether the "SO_PEERGROUPS is unavailable" warning was logged already (once per process).
    private static let warnedGroupsUnavailable = Atomic<Bool>(false)

    /// The peer's pid, uid, primary gid and supplementary groups.
    ///
    /// Returns `nil` only for channels that are not sockets (in-process tests). Fails with
    /// ``PeerCredentialsError`` when the kernel does not report the peer's credentials; the caller
    /// must then refuse the connection rather than serve it with unknown credentials.
    ///
    /// Supplementary groups that cannot be read (kernels before 4.13, more than
    /// `MENTORY_PEER_GROUPS_CAPACITY` groups) are left out: the peer then gets less access, never more.
    static func read(_ channel: any Channel, logger: Logger) -> EventLoopFuture<PeerCredentials?> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let credentials: EventLoopFuture<mentory_ucred> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET),
            name: NIOBSDSocket.Option(rawValue: mentory_so_peercred())
        )
        return credentials.flatMapError { error in
            channel.eventLoop.makeFailedFuture(PeerCredentialsError(underlying: error))
        }.flatMap { credentials in
            Self.groups(provider, eventLoop: channel.eventLoop, logger: logger).map { groups in
                PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: groups)
            }
        }
    }

    private static func groups(
        _ provider: any SocketOptionProvider,
        eventLoop: any EventLoop,
        logger: Logger
    ) -> EventLoopFuture<[UInt32]> {
        let level = NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET)
        let name = NIOBSDSocket.Option(rawValue: mentory_so_peergroups())
        let read: EventLoopFuture<mentory_peer_groups> = provider.unsafeGetSocketOption(level: level, name: name)
        return read.flatMap { buffer -> EventLoopFuture<[UInt32]> in
            let slots = Self.slots(of: buffer)
            // NIO zeroes the buffer and the kernel sorts the groups ascending, so every nonzero slot is
            // a group and a zero in the first slot is either group 0 or "no groups at all".
            let nonzero = slots.filter { $0 != 0 }
            guard slots.first == 0 else { return eventLoop.makeSucceededFuture(nonzero) }
            let probe: EventLoopFuture<NoGroups> = provider.unsafeGetSocketOption(level: level, name: name)
            return probe.map { _ in nonzero }.recover { error in
                (error as? IOError)?.errnoCode == ERANGE ? [0] + nonzero : nonzero
            }
        }.recover { error in
            Self.warnGroupsUnavailable(error, logger: logger)
            return []
        }
    }

    private static func slots(of buffer: mentory_peer_groups) -> [UInt32] {
        withUnsafeBytes(of: buffer.groups) { Array($0.bindMemory(to: UInt32.self)) }
    }

    private static func warnGroupsUnavailable(_ error: any Error, logger: Logger) {
        let errnoCode = (error as? IOError)?.errnoCode
        let reason =
            errnoCode == ERANGE
            ? "a peer has more than \(MENTORY_PEER_GROUPS_CAPACITY) supplementary groups"
            : "SO_PEERGROUPS failed (\(error)); it needs Linux 4.13 or later"
        if errnoCode == ERANGE || !Self.warnedGroupsUnavailable.exchange(true, ordering: .relaxed) {
            logger.warning(
                "supplementary groups unavailable; access rules see only the primary group",
                metadata: ["reason": "\(reason)"]
            )
        }
    }
}
