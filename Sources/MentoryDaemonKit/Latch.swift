/// A one-shot signal between the daemon's services: set once with a value, awaited by any number.
///
/// The store's service sets its latch with the opened stores, and the handlers' service waits for
/// it before registering anything; each service sets a `Latch<Void>` when it ends, and the
/// resources it depends on wait for it before they close (``ResourceService``).
actor Latch<Value: Sendable> {
    private var value: Value?
    private var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
    private var nextWaiter = 0

    /// Sets the latch: every waiter, now and later, gets `value`. Only the first call counts.
    func set(_ value: Value) {
        guard self.value == nil else { return }
        self.value = value
        let waiters = self.waiters
        self.waiters = [:]
        for waiter in waiters.values { waiter.resume(returning: value) }
    }

    /// Whether ``set(_:)`` was called.
    var isSet: Bool { self.value != nil }

    /// The value once set; waits as long as it takes, whatever cancellation says.
    func wait() async -> Value {
        if let value = self.value { return value }
        let id = self.nextID()
        // Never resumed with nil: only set(_:) resumes a waiter registered here.
        return await withCheckedContinuation { self.waiters[id] = $0 }!
    }

    /// The value once set, or `nil` as soon as the calling task is cancelled.
    func waitUnlessCancelled() async -> Value? {
        let id = self.nextID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                if let value = self.value {
                    continuation.resume(returning: value)
                } else if Task.isCancelled {
                    continuation.resume(returning: nil)
                } else {
                    self.waiters[id] = continuation
                }
            }
        } onCancel: {
            Task { await self.cancel(id) }
        }
    }

    private func cancel(_ id: Int) {
        self.waiters.removeValue(forKey: id)?.resume(returning: nil)
    }

    private func nextID() -> Int {
        defer { self.nextWaiter += 1 }
        return self.nextWaiter
    }
}
