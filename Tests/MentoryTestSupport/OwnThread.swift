import Foundation

/// Runs blocking code (a client's socket calls) on a thread of its own, so that no thread of the cooperative pool
/// waits on a socket: on a 2-core machine the pool has two, and tests blocking both would hold up every other test's
/// awaits until their timeouts.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}
