import Configuration
import Logging
import MentoryWire
import SwiftProtobuf

/// What a handler sees of the daemon between calls: its own state, its own configuration
/// section, and the right to publish on its own topics.
///
/// A context lives on the engine's executor for the duration of one call; it is not `Sendable`, so
/// it cannot leak into another task. Publishing is typed by the handler's ``MentoryHandler/Namespace``:
/// a handler cannot even name another namespace's topic.
public struct HandlerContext<Handler: MentoryHandler> {
    /// The handler's state, as ``MentoryHandler/open(_:)`` returned it.
    public let state: Handler.State
    /// The handler's configuration section, `handlers.<namespace>`; a reload replaces it.
    public let config: ConfigReader
    /// A logger labelled with the namespace.
    public let logger: Logger
    /// The source of wall-clock time.
    public let clock: any SessionClock
    private let publisher: (_ topic: String, _ body: Data) -> Void

    /// Creates a context; the host does this, and so does the SDK's test support.
    ///
    /// `publisher` is called synchronously, on the caller's executor, for every publish.
    public init(
        state: Handler.State,
        config: ConfigReader,
        logger: Logger,
        clock: any SessionClock,
        publisher: @escaping (_ topic: String, _ body: Data) -> Void
    ) {
        self.state = state
        self.config = config
        self.logger = logger
        self.clock = clock
        self.publisher = publisher
    }

    /// Publishes `change` on `topic` to every subscriber, and keeps it in the topic's ring for
    /// subscribers that resume.
    public func publish<Change, Snapshot>(_ change: Change, on topic: TopicSchema<Handler.Namespace, Change, Snapshot>)
    {
        self.publisher(topic.name, change.wireBody())
    }
}

@available(*, unavailable)
extension HandlerContext: Sendable {}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
