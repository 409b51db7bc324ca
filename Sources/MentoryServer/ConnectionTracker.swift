import MentoryEngine
import NIOCore

/// The server's bookkeeping of open connections. Lives on the server's event loop.
final class ConnectionTracker {
    private var nextID: UInt64 = 0
    private(set) var open: [ConnectionID: any Channel] = [:]
    private var closedWaiters: [EventLoopPromise<Void>] = []

    init() {}

    /// Records a new connection and returns its id.
    func add(_ channel: any Channel) -> ConnectionID {
        self.nextID += 1
        let id = ConnectionID(self.nextID)
        self.open[id] = channel
        return id
    }

    func remove(_ id: ConnectionID) {
        self.open[id] = nil
        if self.open.isEmpty {
            for waiter in self.closedWaiters { waiter.succeed() }
            self.closedWaiters.removeAll()
        }
    }

    /// A future that succeeds once no connection is open.
    func allClosed(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        if self.open.isEmpty { return eventLoop.makeSucceededVoidFuture() }
        let promise = eventLoop.makePromise(of: Void.self)
        self.closedWaiters.append(promise)
        return promise.futureResult
    }
}
