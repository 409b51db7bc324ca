import Logging
import MentoryEngine
import MentoryStorage

/// The stores the daemon runs on, opened first at start-up and closed last at shut-down.
struct OpenedStores: Sendable {
    var diary: any DiaryStore
    var mentor: any MentorStateStore
    /// Extra handler modules the store brings (registered after the built-in ones).
    var handlers: [any MentoryHandler] = []
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
