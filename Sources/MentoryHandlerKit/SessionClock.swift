#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The engine's source of time, so tests can fix it.
public protocol SessionClock: Sendable {
    /// The current wall-clock time.
    func now() -> Date
}

/// The real clock.
public struct SystemSessionClock: SessionClock {
    public init() {}

    public func now() -> Date { Date() }
}

extension SessionClock {
    /// The current time as milliseconds since 1970, as the wire carries it.
    public func nowUnixMilliseconds() -> Int64 {
        Int64((self.now().timeIntervalSince1970 * 1000).rounded())
    }
}
