/// A condition a test waited for still did not hold at the wait's deadline.
public struct WaitTimedOut: Error, CustomStringConvertible {
    /// What the test waited for, as the call named it.
    public var what: String
    /// How long it waited.
    public var timeout: Duration

    public var description: String { "timed out after \(self.timeout) waiting until \(self.what)" }
}

/// Waits until `condition` holds, checking it every `interval`, and throws ``WaitTimedOut`` naming
/// `what` if it still does not hold after `timeout`.
///
/// The wait returns as soon as the condition holds; the deadline is only how long a loaded two-core
/// machine may need (a debug daemon among a hundred other tests), never a timing assertion. The checks
/// suspend between them, so a wait holds no thread.
public func waitUntil(
    _ what: String,
    timeout: Duration = .seconds(120),
    interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async throws {
    guard try await eventually(timeout: timeout, interval: interval, condition) else {
        throw WaitTimedOut(what: what, timeout: timeout)
    }
}

/// Waits until `condition` holds, as ``waitUntil(_:timeout:interval:_:)`` does, and returns whether it
/// did: for `#expect(await eventually { ... })`.
public func eventually(
    timeout: Duration = .seconds(120),
    interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}
