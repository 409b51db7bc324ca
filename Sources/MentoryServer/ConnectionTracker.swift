import MentoryEngine
import MentoryHandlerKit
import NIOCore

/// The server's bookkeeping of open connections. Lives on the server's event loop.
final class ConnectionTracker {
    private var lastID: UInt64 = 0
    private(set) var open: [ConnectionID: SocketConnection] = [:]
    private var uids: [ConnectionID: UInt32] = [:]
    private var perUID: [UInt32: Int] = [:]
    private var closedWaiters: [EventLoopPromise<Void>] = []
    /// The most connections open at once; a reload may change it.
    var maxConnections: Int
    /// The most connections one uid may have open at once; a reload may change it.
    var maxConnectionsPerUID: Int

    init(maxConnections: Int, maxConnectionsPerUID: Int) {
        self.maxConnections = maxConnections
        self.maxConnectionsPerUID = maxConnectionsPerUID
    }

    /// How many connections `uid` has open.
    func count(for uid: UInt32) -> Int {
        self.perUID[uid] ?? 0
    }

    /// The id of the next connection.
    func nextID() -> ConnectionID {
        self.lastID += 1
        return ConnectionID(self.lastID)
    }

    /// Records the connection `id` (from ``nextID()``), served by `socket` for `uid`.
    func add(_ socket: SocketConnection, id: ConnectionID, uid: UInt32?) {
        self.open[id] = socket
        if let uid {
            self.uids[id] = uid
            self.perUID[uid, default: 0] += 1
        }
    }

    func remove(_ id: ConnectionID) {
        self.open[id] = nil
        if let uid = self.uids.removeValue(forKey: id) {
            self.perUID[uid]! -= 1
            if self.perUID[uid] == 0 { self.perUID[uid] = nil }
        }
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
