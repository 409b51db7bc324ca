#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryStorage
import MentoryStorageAdmin
import MentoryStorageSQLite
import MentoryWire
import NIOCore

/// Which store the daemon runs on (`storage.backend`).
enum StorageBackend: String, Sendable, CaseIterable {
    /// A SQLite database in the state directory: every acknowledged write survives a crash.
    case sqlite
    /// Memory only: everything is lost when the daemon stops. For tests and throw-away runs.
    case memory
}

/// The stores the daemon runs on, opened first at start-up and closed last at shut-down.
struct OpenedStores: Sendable {
    var diary: any DiaryStore
    var mentor: any MentorStateStore
    /// Extra handler modules the store brings (registered after the built-in ones).
    var handlers: [any MentoryHandler] = []
    /// Releases the stores; called after every handler has closed.
    var close: @Sendable () async -> Void
    /// The integrity check opening skipped after a clean shutdown, run in the background once the
    /// daemon is ready (``StoreVerificationService``); `nil` when there is nothing to check.
    var verify: (@Sendable () async -> SQLiteSessionStore.IntegrityCheck)? = nil
}

/// Why the daemon could not open its store; it logs this and exits non-zero.
struct StoreStartupError: Error, CustomStringConvertible {
    var description: String
}

enum StoreBootstrap {
    /// The database's file name inside the state directory.
    static let databaseFileName = "mentoryd.sqlite"

    /// Opens the stores the settings ask for.
    ///
    /// With the SQLite backend, creates the state directory (mode 0700) when missing and opens
    /// `mentoryd.sqlite` in it; a database that cannot be used safely stops the start-up with a
    /// message saying why and what to do.
    /// Both stores serve requests on `eventLoop`, the engine's: the in-memory store runs on it, on the
    /// engine's own `executor`, so that requests reach it without a hop; the SQLite store starts its
    /// batches and resumes its writers there (``EventLoopCallerLoop``).
    static func open(
        settings: DaemonSettings, eventLoop: any EventLoop, executor: any SerialExecutor, logger: Logger
    ) async throws
        -> OpenedStores
    {
        switch settings.storageBackend {
        case .memory:
            let store = InMemorySessionStore(executor: executor)
            logger.warning(
                "store opened in memory: diary entries and the mentor state are lost when mentoryd stops",
                metadata: ["backend": "memory"]
            )
            return OpenedStores(diary: store, mentor: store, close: {})
        case .sqlite:
            let directory = settings.stateDirectory
            try self.prepareStateDirectory(directory, logger: logger)
            let path = directory.hasSuffix("/") ? directory + databaseFileName : directory + "/" + databaseFileName
            let store: SQLiteSessionStore
            let started = ContinuousClock.now
            do {
                // The open may wait for another daemon's lock: on a thread of its own, off the pool.
                var configuration = SQLiteSessionStore.Configuration(path: path)
                // Never refuse a write the server admitted: the commit queue holds at most one write
                // per request in flight.
                configuration.maxQueuedWrites = settings.maxConnections * settings.maxRequestsInFlight
                configuration.checkpointPages = settings.checkpointPages
                configuration.maxLogPages = settings.maxLogPages
                configuration.callerLoop = EventLoopCallerLoop(eventLoop: eventLoop)
                // A full disk or an I/O error reaches the journal, not only the client that wrote.
                configuration.logger = logger
                store = try await SQLiteSessionStore.opened(configuration: configuration)
            } catch {
                throw StoreStartupError(description: "cannot open the store: \(MentoryError(error).message)")
            }
            // No entry count here: COUNT(*) reads every page of the table, which made start-up grow
            // with the diary (about 20 ms at 10,000 entries) before READY=1. For the same reason the
            // integrity check runs before READY=1 only after an unclean shutdown.
            let integrity = store.integrityCheck
            logger.info(
                "store opened",
                metadata: [
                    "backend": "sqlite", "path": "\(path)", "ms": "\(Milliseconds(since: started))",
                    "quick_check": integrity == .pending ? "after ready (clean shutdown)" : "passed before opening",
                    "sqlite": "\(SQLiteSessionStore.sqliteVersion)",
                    "checkpoint": "\(store.checkpointMode)",
                ]
            )
            var verify: (@Sendable () async -> SQLiteSessionStore.IntegrityCheck)?
            if integrity == .pending {
                verify = { await store.verifyIntegrity() }
            }
            return OpenedStores(
                diary: store,
                mentor: store,
                handlers: [
                    StorageAdminHandler(
                        target: store,
                        snapshots: BackupSnapshots(directory: directory, maxFrameLength: settings.maxFrameLength)
                    )
                ],
                close: {
                    do {
                        try await store.close()
                        logger.info("store closed", metadata: ["path": "\(path)"])
                    } catch {
                        logger.error("cannot close the store cleanly (nothing acknowledged is lost): \(error)")
                    }
                },
                verify: verify
            )
        }
    }

    /// Creates `directory` (and missing parents) with mode 0700, or checks the existing one.
    ///
    /// Each directory it creates is made durable: its parent is fsynced right after the `mkdir`,
    /// so that a power cut cannot take the state directory (and the diary in it) away, as it could
    /// where systemd's `StateDirectory=` did not create it (`scripts/run.sh`, a user instance).
    private static func prepareStateDirectory(_ directory: String, logger: Logger) throws {
        guard !directory.isEmpty else {
            throw StoreStartupError(
                description: "the state directory is empty; set state.directory or pass --state-dir")
        }
        var info = stat()
        if stat(directory, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw StoreStartupError(description: "the state directory \(directory) is not a directory")
            }
            if info.st_mode & 0o077 != 0 {
                logger.warning(
                    "the state directory is readable by other users; the diary is private, consider chmod 700",
                    metadata: ["path": "\(directory)", "mode": "\(String(info.st_mode & 0o777, radix: 8))"]
                )
            }
            return
        }
        // Create the missing components from the top, each 0700, each followed by an fsync of its parent.
        var current = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            let parent = current.isEmpty ? "/" : current
            current += "/" + component
            if mkdir(current, 0o700) == 0 {
                try self.syncDirectory(parent, creating: current)
            } else if errno != EEXIST {
                throw StoreStartupError(
                    description: "cannot create the state directory \(current): \(String(cString: strerror(errno))); "
                        + "create it yourself or pass another --state-dir"
                )
            }
        }
        _ = chmod(directory, 0o700)
        logger.notice("created the state directory", metadata: ["path": "\(directory)"])
    }

    /// Fsyncs `parent`, so that the entry of `created`, just made in it, survives a power cut.
    private static func syncDirectory(_ parent: String, creating created: String) throws {
        let descriptor = openDirectory(parent)
        var failure = errno
        if descriptor >= 0 {
            failure = fsync(descriptor) == 0 ? 0 : errno
            _ = close(descriptor)
        }
        guard failure == 0 else {
            throw StoreStartupError(
                description: "created the state directory \(created) but cannot make it durable: syncing \(parent) "
                    + "failed (\(String(cString: strerror(failure)))); check the file system, or create the "
                    + "directory yourself"
            )
        }
    }
}

/// Opens the directory at `path` for an fsync (outside ``StoreBootstrap``, whose `open` hides the C function).
private func openDirectory(_ path: String) -> Int32 {
    open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
}

extension SQLiteSessionStore: StorageBackupTarget {
    public func writeBackup(to path: String) async throws(MentoryError) -> Int {
        try await reportingStorageErrors { () async throws(StorageError) in
            try await self.backup(to: path).diaryEntries
        }
    }
}
