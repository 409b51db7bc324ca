/// Holds whoever passes it until the test opens it, counting arrivals: for tests that must catch
/// a probe, a snapshot or any other awaited step in the middle.
public actor TestGate {
    private var isOpen: Bool
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// How many times ``pass()`` was called.
    public private(set) var arrivals = 0

    /// A gate that starts open (passing returns at once) or closed.
    public init(open: Bool) {
        self.isOpen = open
    }

    /// Returns once the gate is open.
    public func pass() async {
        self.arrivals += 1
        guard !self.isOpen else { return }
        await withCheckedContinuation { self.waiters.append($0) }
    }

    /// Lets every waiter and every later arrival through.
    public func open() {
        self.isOpen = true
        for waiter in self.waiters { waiter.resume() }
        self.waiters.removeAll()
    }

    /// Holds later arrivals again.
    public func close() {
        self.isOpen = false
    }
}
