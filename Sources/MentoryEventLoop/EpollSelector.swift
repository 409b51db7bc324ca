import CMentoryShims
import Glibc

/// What a descriptor registered with an ``EpollSelector`` is told, on the loop's thread.
public protocol EpollHandler: AnyObject {
    /// The descriptor is ready for `events`: what its registration asked for, and always hang-ups and errors.
    ///
    /// Level-triggered: a descriptor still ready when the loop next waits is reported again.
    func ready(_ events: EpollEvents, registration: EpollRegistration)

    /// The loop is shutting down and has deregistered the descriptor; it is not closed (that is the handler's).
    func loopShutDown(registration: EpollRegistration)
}

/// What runs once per turn of an ``EpollEventLoop``, after the turn's ready descriptors and queued tasks, before the
/// loop waits again: where a connection layer writes what the turn produced, once per connection (Redis's
/// `beforeSleep`). Asked for with ``EpollSelector/atEndOfTurn(_:)``, on the loop's thread.
public protocol EpollTurnEndHandler: AnyObject {
    /// The turn's work is done; what this queues or asks for runs before the loop waits.
    func turnEnded()
}

/// The descriptors an ``EpollEventLoop`` watches, and the handler each one's readiness goes to.
///
/// Confined to the loop's thread: code reaches it in ``EpollEventLoop/execute(withSelector:)`` and
/// ``EpollEventLoop/submit(withSelector:)``, and through a registration's ``EpollRegistration/selector`` in a
/// handler's callback. The loop holds each registration, and through it the handler, until it is deregistered.
public final class EpollSelector {
    /// A registration's place, reused once it is deregistered; the generation tells a reused slot from the old one.
    private struct Slot {
        var generation: UInt32 = 0
        var registration: EpollRegistration?
    }

    /// The epoll instance, which the loop owns.
    let epoll: Int32
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    /// Asked for this turn's end, in order; and the list being run, kept for its storage.
    private var turnEndHandlers: [any EpollTurnEndHandler] = []
    private var endingTurn: [any EpollTurnEndHandler] = []
    /// How many descriptors are registered.
    public private(set) var count = 0

    init(epoll: Int32) {
        self.epoll = epoll
    }

    /// Watches `descriptor` for `interest` (hang-ups and errors are always reported), telling `handler` when it is
    /// ready, until the returned registration is deregistered or the loop shuts down.
    ///
    /// The descriptor stays the caller's: deregister it before closing it.
    public func register(
        _ descriptor: Int32, interest: EpollEvents, handler: any EpollHandler
    ) throws(EpollError) -> EpollRegistration {
        let index: Int
        if let free = self.freeSlots.popLast() {
            index = free
        } else {
            precondition(self.slots.count < Int(UInt32.max), "too many registrations")
            index = self.slots.count
            self.slots.append(Slot())
        }
        let generation = self.slots[index].generation &+ 1
        let token = UInt64(generation) << 32 | UInt64(index)
        guard mentory_epoll_control(self.epoll, descriptor, interest.rawValue, token, 0) == 0 else {
            let error = EpollError("epoll_ctl(EPOLL_CTL_ADD)", errno: errno)
            self.freeSlots.append(index)
            throw error
        }
        let registration = EpollRegistration(
            descriptor: descriptor, interest: interest, token: token, handler: handler, selector: self)
        self.slots[index] = Slot(generation: generation, registration: registration)
        self.count += 1
        return registration
    }

    /// Runs `handler` once the descriptors and tasks of this turn are handled, before the loop waits again; asked
    /// for during that run, it runs then too. Each call is one run: a caller asks once a turn.
    public func atEndOfTurn(_ handler: any EpollTurnEndHandler) {
        self.turnEndHandlers.append(handler)
    }

    /// Whether a handler waits for the end of the turn.
    var hasTurnEndHandlers: Bool { !self.turnEndHandlers.isEmpty }

    /// Runs the handlers asked for until now.
    func endTurn() {
        swap(&self.turnEndHandlers, &self.endingTurn)
        for handler in self.endingTurn { handler.turnEnded() }
        self.endingTurn.removeAll(keepingCapacity: true)
    }

    /// Tells the handler of the registration `token` names that it is `events`-ready, unless it was deregistered.
    func dispatch(token: UInt64, events: UInt32) {
        let index = Int(truncatingIfNeeded: token & 0xFFFF_FFFF)
        guard index < self.slots.count, self.slots[index].generation == UInt32(truncatingIfNeeded: token >> 32),
            let registration = self.slots[index].registration, let handler = registration.handler
        else { return }  // Deregistered earlier in the same batch of events.
        handler.ready(EpollEvents(rawValue: events), registration: registration)
    }

    /// Frees the slot of a registration that is being deregistered.
    func remove(_ registration: EpollRegistration) {
        let index = Int(truncatingIfNeeded: registration.token & 0xFFFF_FFFF)
        self.slots[index].registration = nil
        self.freeSlots.append(index)
        self.count -= 1
    }

    /// Deregisters every descriptor and tells each handler, as the loop shuts down.
    func shutDown() {
        for index in self.slots.indices {
            guard let registration = self.slots[index].registration, let handler = registration.handler else {
                continue
            }
            registration.deregister()
            handler.loopShutDown(registration: registration)
        }
    }
}

/// One descriptor's registration with an ``EpollSelector``: confined to the loop's thread, as the selector is.
public final class EpollRegistration {
    /// The descriptor watched.
    public let descriptor: Int32
    /// What it is watched for, besides hang-ups and errors.
    public private(set) var interest: EpollEvents
    /// The selector it is registered with.
    public unowned let selector: EpollSelector
    /// The epoll data of the registration: its slot and the slot's generation.
    let token: UInt64
    /// Held while registered, and let go by ``deregister()`` (a handler may hold its registration in turn).
    private(set) var handler: (any EpollHandler)?

    init(
        descriptor: Int32, interest: EpollEvents, token: UInt64, handler: any EpollHandler, selector: EpollSelector
    ) {
        self.descriptor = descriptor
        self.interest = interest
        self.token = token
        self.handler = handler
        self.selector = selector
    }

    /// Whether the descriptor is still watched.
    public var isRegistered: Bool { self.handler != nil }

    /// Watches the descriptor for `interest` instead; does nothing once it is deregistered or if it is unchanged.
    @inlinable
    public func setInterest(_ interest: EpollEvents) throws(EpollError) {
        guard interest != self.interest, self.isRegistered else { return }
        try self.changeInterest(to: interest)
    }

    @usableFromInline
    func changeInterest(to interest: EpollEvents) throws(EpollError) {
        guard mentory_epoll_control(self.selector.epoll, self.descriptor, interest.rawValue, self.token, 1) == 0
        else { throw EpollError("epoll_ctl(EPOLL_CTL_MOD)", errno: errno) }
        self.interest = interest
    }

    /// Stops watching the descriptor and lets go of its handler: readiness already reported for it in the batch
    /// being handled is not delivered. Does nothing the second time. Call it before closing the descriptor.
    public func deregister() {
        guard self.isRegistered else { return }
        // EBADF or ENOENT only if the caller closed the descriptor first, which removed it from the epoll set.
        _ = mentory_epoll_remove(self.selector.epoll, self.descriptor)
        self.selector.remove(self)
        self.handler = nil
    }
}
