import Logging
import MentoryEngine
import MentoryStorage

/// The stores the daemon runs on, opened first at start-up and closed last at shut-down.
struct OpenedStores: Sendable {
    var diary: any DiaryStore
    var mentor: any MentorStateStore
    /// Releases the stores; called after every handler has closed.
    var close: @Sendable () async -> Void
}

enum StoreBootstrap {
    /// Opens the stores the settings ask for.
    static func open(settings: DaemonSettings, logger: Logger) async throws -> OpenedStores {
        let store = InMemorySessionStore()
        logger.info("store opened", metadata: ["backend": "memory"])
        return OpenedStores(diary: store, mentor: store, close: {})
    }
}
