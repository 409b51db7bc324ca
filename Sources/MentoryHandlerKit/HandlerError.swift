import MentoryWire

/// An error a handler defines itself, with a stable code of its own and the cause kept.
///
/// Clients switch on ``code``, one of the protocol's stable wire codes (`Mentory_V1_ErrorCode`, from MentoryWire),
/// and may look at ``reason``, the handler's own stable name for the failure; the wire carries it
/// as `Error.reason`, prefixed with the namespace (`diary.entry_conflict`). ``underlyingError`` goes to
/// the daemon's log only, never to the client.
///
/// A handler may also throw MentoryWire's `MentoryError` directly; any other error becomes `INTERNAL`, and is logged.
public protocol HandlerError: Error, Sendable {
    /// The wire code: `.invalidArgument`, `.notFound`, `.conflict`, `.unavailable`, `.storageFailure`, ...
    var code: Mentory_V1_ErrorCode { get }
    /// A stable name for this failure within the namespace, in `snake_case`, e.g. `entry_conflict`.
    var reason: String { get }
    /// A sentence saying what went wrong and what to do about it.
    var message: String { get }
    /// What caused the failure, for the daemon's log.
    var underlyingError: (any Error)? { get }
}

extension HandlerError {
    public var underlyingError: (any Error)? { nil }
}

/// A handler's configuration section cannot be used: thrown from ``MentoryHandler/open(_:)``, it stops
/// start-up as a configuration error (exit status 78, or `STARTUP_FAILED` under socket activation),
/// naming the key; from ``MentoryHandler/reload(context:)`` it refuses the reload, naming the key.
public struct HandlerConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The key within the handler's section, e.g. `maxNotes` (the daemon prefixes `handlers.<namespace>.`).
    public var key: String
    /// What is wrong with its value and what to write instead.
    public var message: String

    /// A problem with `key`: `message` says what is wrong and what to write instead.
    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }

    public var description: String { "\(self.key): \(self.message)" }
}
