import MentoryEventLoop
import NIOCore

/// Flushes every connection that wrote during an event-loop tick, with one task for all of them.
///
/// A published event reaches every subscriber's connection in the same tick. Each connection asking the
/// loop for its own end-of-tick flush would cost one task per subscriber per tick; the connections of one
/// loop share this flusher instead, which queues a single task that flushes them all, in the order they
/// first wrote. On an ``EpollEventLoop`` (``flushAtEndOfTurn(of:)``) it runs at the end of the loop's turn instead,
/// once the turn's descriptors and tasks are handled, as Redis's `beforeSleep` writes its clients' replies. It
/// also keeps the tick's ``EventRuns``, so that the subscribers of a topic share one copy of the tick's events.
/// Confined to its event loop.
package final class TickFlusher: EpollTurnEndHandler {
    private let eventLoop: any EventLoop
    /// The connections to flush at the end of this tick. Each appears once: a connection asks only when it
    /// has no flush scheduled yet.
    private var pending: [Connection] = []
    private var flushing: [Connection] = []
    private var scheduled = false
    /// The tick's event runs, shared by this loop's subscribers (``EventRun``); ended as the tick's flush starts.
    let eventRuns = SharedEventRuns()
    /// The task queued once per tick: made on the loop the first time, so that queueing it allocates
    /// nothing after that. It holds the flusher weakly, so that the two do not keep each other alive.
    private var flushTask: (@Sendable () -> Void)?
    /// The loop's selector, once the flusher runs at the end of its turns rather than as a task.
    private var selector: EpollSelector?

    package init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Flushes at the end of each turn of the loop `selector` belongs to (this flusher's loop), not in a task.
    func flushAtEndOfTurn(of selector: EpollSelector) {
        self.selector = selector
    }

    package func turnEnded() {
        self.flushAll()
    }

    /// Flushes `connection` once the work already queued on the loop has run.
    func flushAtEndOfTick(_ connection: Connection) {
        self.pending.append(connection)
        guard !self.scheduled else { return }
        self.scheduled = true
        if let selector = self.selector { return selector.atEndOfTurn(self) }
        if let flushTask = self.flushTask {
            self.eventLoop.execute(flushTask)
        } else {
            self.eventLoop.execute(self.makeFlushTask())
        }
    }

    private func makeFlushTask() -> @Sendable () -> Void {
        let flusher = NIOLoopBound(WeakFlusher(self), eventLoop: self.eventLoop)
        let task: @Sendable () -> Void = { flusher.value.flusher?.flushAll() }
        self.flushTask = task
        return task
    }

    private func flushAll() {
        self.scheduled = false
        self.eventRuns.runs.endTick()
        // Swapped rather than copied, so that a connection asking again while being flushed (a write from
        // a writability callback) lands in the next tick's list, and neither array is reallocated per tick.
        swap(&self.pending, &self.flushing)
        for connection in self.flushing {
            connection.flushScheduledWrites()
        }
        self.flushing.removeAll(keepingCapacity: true)
    }
}

/// A weak reference to a flusher, for the task it queues.
private final class WeakFlusher {
    weak var flusher: TickFlusher?

    init(_ flusher: TickFlusher) {
        self.flusher = flusher
    }
}
