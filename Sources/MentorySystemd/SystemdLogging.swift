import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A log level shared by every logger of a process and changeable while it runs, e.g. on reload.
///
/// Loggers made by ``SystemdLogging/handlerFactory(syslogIdentifier:level:destination:)`` read it
/// on each log call, so a change reaches loggers that already exist.
public final class DynamicLogLevel: Sendable {
    private let rawLevel: Atomic<UInt8>

    /// A shared level starting at `level`.
    public init(_ level: Logger.Level) {
        self.rawLevel = Atomic(Self.encode(level))
    }

    /// The level in effect.
    public var level: Logger.Level {
        get { Self.decode(self.rawLevel.load(ordering: .relaxed)) }
        set { self.rawLevel.store(Self.encode(newValue), ordering: .relaxed) }
    }

    private static func encode(_ level: Logger.Level) -> UInt8 {
        UInt8(Logger.Level.allCases.firstIndex(of: level)!)
    }

    private static func decode(_ raw: UInt8) -> Logger.Level {
        Logger.Level.allCases[Int(raw)]
    }
}

/// Wraps a handler so its level follows a ``DynamicLogLevel`` unless set on this logger.
public struct DynamicLevelLogHandler: LogHandler {
    private var wrapped: any LogHandler
    private let sharedLevel: DynamicLogLevel
    private var overriddenLevel: Logger.Level?

    /// Wraps `wrapped`, taking the level from `level`.
    public init(wrapping wrapped: any LogHandler, level: DynamicLogLevel) {
        self.wrapped = wrapped
        self.sharedLevel = level
    }

    /// The shared level, unless this logger's level was set explicitly.
    public var logLevel: Logger.Level {
        get { self.overriddenLevel ?? self.sharedLevel.level }
        set { self.overriddenLevel = newValue }
    }

    /// The wrapped handler's metadata.
    public var metadata: Logger.Metadata {
        get { self.wrapped.metadata }
        set { self.wrapped.metadata = newValue }
    }

    /// The wrapped handler's metadata provider.
    public var metadataProvider: Logger.MetadataProvider? {
        get { self.wrapped.metadataProvider }
        set { self.wrapped.metadataProvider = newValue }
    }

    /// One metadata value of the wrapped handler.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.wrapped[metadataKey: key] }
        set { self.wrapped[metadataKey: key] = newValue }
    }

    /// Hands `event` to the wrapped handler.
    public func log(event: LogEvent) {
        self.wrapped.log(event: event)
    }
}

/// Where mentoryd's logs go.
public enum LogDestination: String, Sendable, Hashable {
    /// Structured entries straight to journald.
    case journal
    /// Lines on standard error.
    case standardError
}

/// Chooses between journald and standard error and makes the log handlers.
public enum SystemdLogging {
    /// `.journal` when standard error is connected to the journal, else `.standardError`.
    ///
    /// systemd sets `JOURNAL_STREAM=DEVICE:INODE` for a service whose output goes to the
    /// journal; it counts only if standard error is still that very stream (a child whose stderr
    /// was redirected inherits the variable but not the stream).
    public static func destination(environment: [String: String]) -> LogDestination {
        guard let stream = environment["JOURNAL_STREAM"], let (device, inode) = self.parseJournalStream(stream) else {
            return .standardError
        }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return .standardError }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode ? .journal : .standardError
    }

    /// Parses `JOURNAL_STREAM`'s `DEVICE:INODE`, both decimal.
    public static func parseJournalStream(_ value: String) -> (device: UInt64, inode: UInt64)? {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        return (device, inode)
    }

    /// A factory for `LoggingSystem.bootstrap` writing to `destination`, every handler following `level`.
    public static func handlerFactory(
        syslogIdentifier: String,
        level: DynamicLogLevel,
        destination: LogDestination
    ) -> @Sendable (String, Logger.MetadataProvider?) -> any LogHandler {
        { label, metadataProvider in
            let handler: any LogHandler =
                switch destination {
                case .journal:
                    JournalLogHandler(
                        label: label, syslogIdentifier: syslogIdentifier, metadataProvider: metadataProvider)
                case .standardError:
                    StreamLogHandler.standardError(label: label, metadataProvider: metadataProvider)
                }
            return DynamicLevelLogHandler(wrapping: handler, level: level)
        }
    }
}
