import NIOCore

/// A task waiting for its deadline: what runs it, and what fails its promise if it never runs.
struct ScheduledTask: Sendable {
    let deadline: NIODeadline
    /// Unique within the loop, in the order tasks were scheduled: equal deadlines run in that order.
    let id: UInt64
    let run: @Sendable () -> Void
    let fail: @Sendable (EventLoopError) -> Void

    /// Whether `self` is due before `other`.
    func precedes(_ other: ScheduledTask) -> Bool {
        self.deadline < other.deadline || (self.deadline == other.deadline && self.id < other.id)
    }
}

/// The scheduled tasks of an ``EpollEventLoop``, earliest first: a binary min-heap.
struct ScheduledTasks: Sendable {
    private var heap: [ScheduledTask] = []

    var isEmpty: Bool { self.heap.isEmpty }

    /// The earliest deadline, if any task waits.
    var nextDeadline: NIODeadline? { self.heap.first?.deadline }

    /// Adds `task`; returns whether it is now the earliest.
    mutating func insert(_ task: ScheduledTask) -> Bool {
        self.heap.append(task)
        self.siftUp(self.heap.count - 1)
        return self.heap[0].id == task.id
    }

    /// Removes and returns the earliest task if it is due at `now`.
    mutating func popDue(at now: NIODeadline) -> ScheduledTask? {
        guard let first = self.heap.first, first.deadline <= now else { return nil }
        self.remove(at: 0)
        return first
    }

    /// Removes and returns the task `id`, if it still waits.
    mutating func remove(id: UInt64) -> ScheduledTask? {
        guard let index = self.heap.firstIndex(where: { $0.id == id }) else { return nil }
        let task = self.heap[index]
        self.remove(at: index)
        return task
    }

    /// Removes and returns every task, in no particular order.
    mutating func removeAll() -> [ScheduledTask] {
        defer { self.heap.removeAll() }
        return self.heap
    }

    private mutating func remove(at index: Int) {
        let last = self.heap.removeLast()
        guard index < self.heap.count else { return }
        self.heap[index] = last
        self.siftDown(index)
        self.siftUp(index)
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.heap[child].precedes(self.heap[parent]) else { return }
            self.heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < self.heap.count else { return }
            let right = left + 1
            let child = right < self.heap.count && self.heap[right].precedes(self.heap[left]) ? right : left
            guard self.heap[child].precedes(self.heap[parent]) else { return }
            self.heap.swapAt(child, parent)
            parent = child
        }
    }
}
