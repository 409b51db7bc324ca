import MentoryWire

/// Runs writes one after another in the order they were started, whoever awaits them.
///
/// Handlers change engine state at once, then persist it. Persisting suspends, so two changes
/// could otherwise reach the store out of order; chaining them keeps the store's last write the
/// engine's last change, while each caller still waits for its own write before it replies.
public struct OrderedWrites: Sendable {
    /// A started write; await ``value`` for its outcome.
    public typealias Write = Task<Result<Void, MentoryError>, Never>

    private var last: Write?

    public init() {}

    /// Starts `write` after every write enqueued before it.
    ///
    /// Await the returned task's value (outside of any access to this struct) for the outcome.
    public mutating func enqueue(
        _ write: @escaping @Sendable () async throws(MentoryError) -> Void
    ) -> Write {
        let previous = self.last
        let task = Write {
            _ = await previous?.value
            do throws(MentoryError) {
                try await write()
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        self.last = task
        return task
    }
}
