import Configuration
import Logging

/// What a handler is given to open and close: its namespace's configuration section, the daemon-wide
/// settings it may read, a logger and the clock.
public struct HandlerSetup: Sendable {
    /// The namespace being opened.
    public let namespace: String
    /// The handler's own configuration section, `handlers.<namespace>`.
    public let config: ConfigReader
    /// A logger labelled with the namespace.
    public let logger: Logger
    /// The source of wall-clock time.
    public let clock: any SessionClock
    /// The daemon-wide settings a handler may read (frame limit, state directory, instance kind...).
    public let settings: GlobalSettings

    /// Creates a setup; the host does this, and so do tests.
    public init(
        namespace: String, config: ConfigReader, logger: Logger, clock: any SessionClock,
        settings: GlobalSettings = GlobalSettings()
    ) {
        self.namespace = namespace
        self.config = config
        self.logger = logger
        self.clock = clock
        self.settings = settings
    }
}
