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
import MentoryHandlerKit
import MentoryWire

/// A store that can copy itself while it serves.
public protocol StorageBackupTarget: Sendable {
    /// Writes a consistent, verified copy of the store to `path`, an absolute path that must not
    /// exist, and returns the number of diary entries the copy holds.
    func writeBackup(to path: String) async throws(MentoryError) -> Int
}

/// Serves the `storage` namespace: administration of the daemon's durable store.
///
/// `backup` takes a consistent snapshot of the database (SQLite's online backup) into a private
/// file in the daemon's state directory while the daemon keeps serving; `backupRead` hands it to
/// the same connection in pieces that fit the frame limit, and the client writes the copy with
/// its own rights wherever it wants. The daemon never writes outside its state directory.
///
/// Because the snapshot holds every diary entry, both methods are privileged: mentory.proto declares
/// them with `(privilege) = PRIVILEGE_OWNER`, so the engine lets only the daemon's user and root call
/// them, whatever `access.rules` says; anyone else, and a peer whose credentials are unknown, gets
/// ``MentoryError/permissionDenied(namespace:method:)`` (it fails closed) before the handler runs.
/// Snapshots are bounded, see ``BackupSnapshots``.
public struct StorageAdminHandler: MentoryHandler {
    public typealias Namespace = MentorySchema.Storage

    private let target: any StorageBackupTarget
    private let snapshots: BackupSnapshots

    /// Creates the handler over `target`.
    ///
    /// - Parameters:
    ///   - target: The store to copy.
    ///   - snapshots: Where snapshots live while connections read them.
    public init(target: any StorageBackupTarget, snapshots: BackupSnapshots) {
        self.target = target
        self.snapshots = snapshots
    }

    public func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.backup) { _, call, context in
            let reply = try await self.snapshots.create(for: call.connection.id, from: self.target, jobs: context.jobs)
            call.logger.notice(
                "backup snapshot taken: \(reply.diaryEntries) entries, \(reply.bytes) bytes",
                metadata: ["bytes": "\(reply.bytes)", "entries": "\(reply.diaryEntries)"]
            )
            return reply
        }
        routes.onAsync(Namespace.backupRead) { request, call, _ in
            let reply = try await self.snapshots.read(for: call.connection.id, at: request.offset)
            if reply.end {
                call.logger.notice("backup snapshot read to the end")
            }
            return reply
        }
    }

    public func connectionClosed(_ connection: ConnectionID, context: HandlerContext<Self>) {
        let snapshots = self.snapshots
        do throws(BackgroundJobs.Refusal) {
            try context.jobs.submit { await snapshots.release(connection) }
        } catch {
            // Refused only at shut-down (or with no runner): close(_:setup:) removes every snapshot then.
            context.logger.warning("the closed connection's backup snapshot stays until shut-down: \(error)")
        }
    }

    public func close(_ state: consuming State, setup: HandlerSetup) async {
        await self.snapshots.removeAll()
    }
}

/// The backup snapshots connections are reading, each a private file in the state directory.
///
/// Bounds: at most ``maxSnapshots`` at once (one per connection); each is removed when its
/// connection reads the last piece, when the connection closes, after ``idleTimeout`` without a
/// read, or at shut-down. Files left by a daemon that died are removed when this is created. The idle
/// timeout is a timer of the daemon's background jobs (``BackgroundJobs``), which the handler passes in.
public actor BackupSnapshots {
    /// The file names' prefix; nothing else in the directory starts with it.
    public static let filePrefix = ".mentoryd-backup-"
    /// The most snapshots that may exist at once.
    public static let maxSnapshots = 2
    /// The largest piece `backupRead` returns, whatever the frame limit.
    public static let maxChunkBytes = 512 * 1024
    /// Room left in a frame for the envelope around a piece.
    static let envelopeOverhead = 256

    private struct Snapshot {
        var path: String
        var descriptor: Int32
        var bytes: UInt64
        var lastRead: ContinuousClock.Instant
        var expiry: BackgroundJobs.Timer?
    }

    /// Where snapshots are written: the daemon's private state directory.
    public let directory: String
    /// The most bytes one read returns: ``maxChunkBytes``, or less so that it fits the frame limit.
    public let chunkBytes: Int
    /// How long a snapshot may go unread before it is removed.
    public let idleTimeout: Duration

    private var snapshots: [ConnectionID: Snapshot] = [:]
    /// Connections whose snapshot is being written; they count toward the limit.
    private var pending: Set<ConnectionID> = []
    /// Pending connections that closed meanwhile: their snapshot is removed as soon as it is written.
    private var abandoned: Set<ConnectionID> = []

    /// - Parameters:
    ///   - directory: The state directory (private to the daemon).
    ///   - maxFrameLength: The daemon's frame limit; pieces stay well below it.
    ///   - idleTimeout: How long an unread snapshot is kept.
    public init(directory: String, maxFrameLength: Int, idleTimeout: Duration = .seconds(300)) {
        self.directory = directory
        self.chunkBytes = max(1024, min(Self.maxChunkBytes, maxFrameLength - Self.envelopeOverhead))
        self.idleTimeout = idleTimeout
        Self.removeLeftovers(in: directory)
    }

    /// The paths of snapshot files in `directory` (for cleanup and tests).
    public static func leftoverFiles(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(Self.filePrefix) }.map { directory + "/" + $0 }
    }

    private static func removeLeftovers(in directory: String) {
        for path in self.leftoverFiles(in: directory) { unlink(path) }
    }

    /// Takes a snapshot of `target` for connection `id`, replacing any it already had; its idle timeout
    /// is a timer of `jobs`.
    func create(
        for id: ConnectionID,
        from target: any StorageBackupTarget,
        jobs: BackgroundJobs
    ) async throws(MentoryError) -> Mentory_V1_StorageBackupReply {
        guard !self.pending.contains(id) else {
            throw .conflict("this connection is already taking a backup snapshot")
        }
        self.release(id)
        guard self.snapshots.count + self.pending.count < Self.maxSnapshots else {
            throw .conflict(
                "\(Self.maxSnapshots) backups are already in progress, the most at once; try again when one ends")
        }
        self.pending.insert(id)
        defer {
            self.pending.remove(id)
            self.abandoned.remove(id)
        }
        let path = "\(self.directory)/\(Self.filePrefix)\(id.rawValue)-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        let entries: Int
        do {
            entries = try await target.writeBackup(to: path)
        } catch {
            unlink(path)
            throw error
        }
        guard !self.abandoned.contains(id) else {
            unlink(path)
            throw .conflict("the connection closed while its backup snapshot was being taken")
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            unlink(path)
            throw .storageFailure("cannot open the backup snapshot \(path): \(reason)")
        }
        // The descriptor keeps the data readable; the name only has to outlive a crash long
        // enough for the next start-up to remove it.
        self.snapshots[id] = Snapshot(
            path: path,
            descriptor: descriptor,
            bytes: UInt64(info.st_size),
            lastRead: .now,
            expiry: nil
        )
        self.scheduleExpiry(of: id, at: .now + self.idleTimeout, jobs: jobs)
        var reply = Mentory_V1_StorageBackupReply()
        reply.bytes = UInt64(info.st_size)
        reply.diaryEntries = UInt32(clamping: entries)
        reply.chunkBytes = UInt32(self.chunkBytes)
        return reply
    }

    /// The piece of connection `id`'s snapshot at `offset`; the last piece removes the snapshot.
    func read(for id: ConnectionID, at offset: UInt64) throws(MentoryError) -> Mentory_V1_StorageBackupReadReply {
        guard var snapshot = self.snapshots[id] else {
            throw .conflict("this connection has no backup snapshot (it ended or expired); call storage.backup first")
        }
        guard offset <= snapshot.bytes else {
            throw .invalidArgument("offset \(offset) is past the snapshot's end (\(snapshot.bytes) bytes)")
        }
        let count = Int(min(UInt64(self.chunkBytes), snapshot.bytes - offset))
        var data = Data(count: count)
        var filled = 0
        while filled < count {
            let got = data.withUnsafeMutableBytes { buffer in
                pread(snapshot.descriptor, buffer.baseAddress! + filled, count - filled, off_t(offset) + off_t(filled))
            }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                let reason = got == 0 ? "the file is shorter than expected" : String(cString: strerror(errno))
                self.release(id)
                throw .storageFailure("cannot read the backup snapshot: \(reason)")
            }
            filled += got
        }
        var reply = Mentory_V1_StorageBackupReadReply()
        reply.data = data
        reply.end = offset + UInt64(count) == snapshot.bytes
        if reply.end {
            self.release(id)
        } else {
            snapshot.lastRead = .now
            self.snapshots[id] = snapshot
        }
        return reply
    }

    /// Removes connection `id`'s snapshot, if any.
    func release(_ id: ConnectionID) {
        if self.pending.contains(id) { self.abandoned.insert(id) }
        guard let snapshot = self.snapshots.removeValue(forKey: id) else { return }
        snapshot.expiry?.cancel()
        close(snapshot.descriptor)
        unlink(snapshot.path)
    }

    /// Removes every snapshot (at shut-down).
    public func removeAll() {
        for id in Array(self.snapshots.keys) { self.release(id) }
    }

    /// How many snapshots exist now.
    public var count: Int { self.snapshots.count }

    /// Checks at `deadline` whether `id`'s snapshot went unread for the idle timeout. Without a timer
    /// (`jobs` refused it: shut-down, when close removes every snapshot) the snapshot stays until then.
    private func scheduleExpiry(of id: ConnectionID, at deadline: ContinuousClock.Instant, jobs: BackgroundJobs) {
        self.snapshots[id]?.expiry = try? jobs.schedule(at: deadline) { [weak self] in
            await self?.expireIfIdle(id, jobs: jobs)
        }
    }

    /// Removes `id`'s snapshot if it went unread for the idle timeout; otherwise checks again when it
    /// would have.
    private func expireIfIdle(_ id: ConnectionID, jobs: BackgroundJobs) {
        guard let snapshot = self.snapshots[id] else { return }
        guard ContinuousClock.now - snapshot.lastRead >= self.idleTimeout else {
            self.scheduleExpiry(of: id, at: snapshot.lastRead + self.idleTimeout, jobs: jobs)
            return
        }
        self.release(id)
    }
}
