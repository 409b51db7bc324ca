import CMentoryShims
import Logging
import MentoryEngine
import MentoryEventLoop
import MentoryHandlerKit
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

/// Reads a connection's peer credentials with `SO_PEERCRED` and `SO_PEERGROUPS`: two `getsockopt` calls (three
/// for a peer whose only group may be 0), no file system access on the event loop.
enum PeerCredentialsReader {
    /// Whether the "SO_PEERGROUPS is unavailable" warning was logged already (once per process).
    private static let warnedGroupsUnavailable = Atomic<Bool>(false)

    /// The pid, uid, primary gid and supplementary groups of the peer of the connected socket `descriptor`.
    ///
    /// Throws ``PeerCredentialsError`` when the kernel does not report the peer's credentials; the caller must then
    /// refuse the connection rather than serve it with unknown credentials.
    ///
    /// Supplementary groups that cannot be read (kernels before 4.13, more than `MENTORY_PEER_GROUPS_CAPACITY`
    /// groups) are left out: the peer then gets less access, never more.
    static func read(_ descriptor: Int32, logger: Logger) throws(PeerCredentialsError) -> PeerCredentials {
        var credentials = mentory_ucred()
        var length = socklen_t(MemoryLayout<mentory_ucred>.size)
        guard getsockopt(descriptor, SOL_SOCKET, mentory_so_peercred(), &credentials, &length) == 0 else {
            throw PeerCredentialsError(underlying: EpollError("getsockopt(SO_PEERCRED)", errno: errno))
        }
        let groups = Self.groups(descriptor, logger: logger)
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: groups)
    }

    private static func groups(_ descriptor: Int32, logger: Logger) -> [UInt32] {
        var buffer = mentory_peer_groups()
        var length = socklen_t(MemoryLayout<mentory_peer_groups>.size)
        guard getsockopt(descriptor, SOL_SOCKET, mentory_so_peergroups(), &buffer, &length) == 0 else {
            Self.warnGroupsUnavailable(errno: errno, logger: logger)
            return []
        }
        let count = Int(length) / MemoryLayout<gid_t>.size
        let slots = withUnsafeBytes(of: buffer.groups) { Array($0.bindMemory(to: UInt32.self).prefix(count)) }
        return slots
    }

    private static func warnGroupsUnavailable(errno code: Int32, logger: Logger) {
        let reason =
            code == ERANGE
            ? "a peer has more than \(MENTORY_PEER_GROUPS_CAPACITY) supplementary groups"
            : "SO_PEERGROUPS failed (\(String(cString: strerror(code)))); it needs Linux 4.13 or later"
        if code == ERANGE || !Self.warnedGroupsUnavailable.exchange(true, ordering: .relaxed) {
            logger.warning(
                "supplementary groups unavailable; access rules see only the primary group",
                metadata: ["reason": "\(reason)"]
            )
        }
    }
}
