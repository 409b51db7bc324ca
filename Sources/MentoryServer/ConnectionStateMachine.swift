import MentoryWire

/// The lifecycle and back-pressure state of one connection, as a value: events in, actions out.
///
/// ``ConnectionHandler`` stores one and mutates it in place. For each thing that happens on the connection
/// (a Hello, a request, a frame written, bytes taken by the kernel, a read asked for, the uid's budget freed,
/// a close) it calls one of the mutating methods here and performs the action returned; the engine calls,
/// the framing, the encoding and every I/O stay in the handler. The machine holds no references, so it
/// allocates nothing and copying it costs only its few words.
///
/// The lifecycle is one ``State``: ``State/awaitingHello`` → ``State/open(_:)`` → ``State/closing(_:)`` →
/// ``State/closed``. The output side (bytes in the pipeline, whether reading is paused for them, whether a
/// flush is due) and the input side (a read held back, a wait for the uid's budget) hold in every state:
/// a connection still writes its errors before its Hello and its last frame while it closes.
struct ConnectionStateMachine {
    /// Where the connection is in its life.
    enum State {
        /// Connected; only a Hello is accepted. Requests are answered HANDSHAKE_REQUIRED.
        case awaitingHello
        /// Handshaken: the engine knows the connection (it is attached), requests are dispatched.
        case open(OpenState)
        /// Closing after an error, the peer's end of input, a failure or a shutdown: no frame is handled.
        case closing(ClosingState)
        /// The channel is inactive and the engine no longer knows the connection.
        case closed
        /// Only while a method changes the payload of the state in place, so that the payload has one
        /// owner and is not copied.
        case modifying
    }

    /// What only an open connection has.
    struct OpenState {
        /// Whether an event was refused since the engine was last told there is room for events.
        var eventsRefused = false
    }

    /// What a closing connection still has.
    struct ClosingState {
        /// Whether the engine still knows the connection: it is detached at once by a failure, and once the
        /// channel is inactive after an error or the peer's end of input.
        var attached: Bool
    }

    /// What to do with a Hello.
    enum HelloAction: Equatable {
        /// The handshake is done: attach the connection to the engine and send the Welcome.
        case attach
        /// Answer with this non-closing connection error (a second Hello).
        case refuse(MentoryError)
        /// Close the connection with this error (a Hello that cannot be accepted).
        case fail(MentoryError)
    }

    /// What to do with a request or a plugin's reply.
    enum RequestAction: Equatable {
        /// Hand it to the engine.
        case dispatch
        /// Answer it with this error instead.
        case refuse(MentoryError)
    }

    /// What to do when the connection is to be closed with an error.
    enum CloseAction: Equatable {
        /// It is closing already.
        case none
        /// Write the closing error and close once it is written; detach from the engine first if `detach`.
        case close(detach: Bool)
    }

    /// What to do after a frame was written into the pipeline.
    enum FrameWrittenAction: Equatable {
        /// Nothing: a flush is scheduled already.
        case none
        /// Schedule the flush that sends what was written this tick.
        case scheduleFlush
        /// The outbound bound is reached: stop dispatching and reading (schedule a flush too if `scheduleFlush`).
        case pauseReading(scheduleFlush: Bool)
    }

    /// What to do when the channel asks for a read.
    enum ReadAction: Equatable {
        /// Read the socket.
        case read
        /// Hold the read back until there is room; it is done when reading resumes.
        case holdBack
    }

    /// What to do once the outbound bytes may have drained far enough for the events refused.
    enum EventsDrainedAction: Equatable {
        /// Nothing: no event was refused, the connection is not open, or the queue is not back to half yet.
        case none
        /// The queue is back to half but the uid has no room for the snapshot: wait for room.
        case waitForRoom
        /// Reserve the snapshot and tell the engine there is room for events again (it sends resets).
        case tellEngine
    }

    /// What to do when the handler is removed from the pipeline.
    struct RemovedAction: Equatable {
        /// Written but never flushed, or flushed but never taken: nothing else will count these out, so they are
        /// counted out here.
        var discardedBytes: Int
        /// Whether to tell the uid's account that the connection is gone (once).
        var closeAccount: Bool
    }

    private(set) var state = State.awaitingHello
    /// At most this many requests in flight before frames wait.
    let maxRequestsInFlight: Int
    /// At this many outbound bytes requests stop and the socket is not read; reading resumes at half.
    let maxOutboundBytes: Int
    /// Events are refused once the outbound bytes pass this; the engine is told at half.
    let subscriberQueueBytes: Int

    /// Bytes written into the pipeline that the kernel has not taken yet.
    private(set) var outboundBytes = 0
    /// The part of ``outboundBytes`` written since the last flush.
    private(set) var unflushedBytes = 0
    /// The part of ``outboundBytes`` flushed that the kernel has not taken yet.
    private(set) var flushedBytes = 0
    /// Whether ``outboundBytes`` reached ``maxOutboundBytes`` and have not drained to half since.
    private(set) var outboundPaused = false
    /// Whether something was written since the last flush.
    private(set) var unflushed = false
    /// Whether a flush is scheduled for the end of this tick.
    private(set) var flushScheduled = false
    /// Whether a read the channel asked for waits for room.
    private(set) var readHeldBack = false
    /// Whether the uid's account will wake the connection when it has room again.
    private(set) var waitingForBudget = false
    /// Whether the uid's account still counts this connection.
    private var accountOpen = true

    init(maxRequestsInFlight: Int, maxOutboundBytes: Int, subscriberQueueBytes: Int) {
        self.maxRequestsInFlight = maxRequestsInFlight
        self.maxOutboundBytes = maxOutboundBytes
        self.subscriberQueueBytes = subscriberQueueBytes
    }

    init(_ configuration: ServerConfiguration) {
        self.init(
            maxRequestsInFlight: configuration.maxRequestsInFlight,
            maxOutboundBytes: configuration.maxOutboundBytes,
            subscriberQueueBytes: configuration.subscriberQueueBytes)
    }

    // MARK: Lifecycle

    /// Whether the connection is handshaken and not closing: Welcome, events and plugin calls may go out.
    var isOpen: Bool {
        if case .open = self.state { return true }
        return false
    }

    /// Whether the connection is closing or closed: no frame is handled and no reply is sent.
    var isClosing: Bool {
        switch self.state {
        case .closing, .closed: return true
        case .awaitingHello, .open: return false
        case .modifying: preconditionFailure("the connection state was left being modified")
        }
    }

    /// Whether the connection still waits for its Hello (the handshake timer runs only then).
    var isAwaitingHello: Bool {
        if case .awaitingHello = self.state { return true }
        return false
    }

    /// A Hello arrived; `rejection` is what is wrong with it, if anything (checked by the handler).
    mutating func helloReceived(rejection: MentoryError?) -> HelloAction {
        switch self.state {
        case .awaitingHello:
            if let rejection { return .fail(rejection) }
            self.state = .open(OpenState())
            return .attach
        case .open, .closing, .closed:
            // A second Hello, whatever it says (frames are not handled while closing: this is for completeness).
            return .refuse(.alreadyHandshaken)
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// A request arrived.
    func requestReceived() -> RequestAction {
        self.isOpen ? .dispatch : .refuse(.handshakeRequired)
    }

    /// A plugin's reply arrived.
    func pluginReplyReceived() -> RequestAction {
        self.isOpen ? .dispatch : .refuse(.handshakeRequired)
    }

    /// The connection is to be closed with an error (a protocol error, a timeout, a shutdown).
    mutating func closeRequested() -> CloseAction {
        switch self.state {
        case .awaitingHello:
            self.state = .closing(ClosingState(attached: false))
            return .close(detach: false)
        case .open:
            self.state = .closing(ClosingState(attached: false))
            return .close(detach: true)
        case .closing, .closed:
            return .none
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The peer closed its side (after the frames it sent whole were handled); returns whether to close.
    mutating func inputClosed() -> Bool {
        switch self.state {
        case .awaitingHello:
            self.state = .closing(ClosingState(attached: false))
            return true
        case .open:
            self.state = .closing(ClosingState(attached: true))
            return true
        case .closing, .closed:
            return false
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The pipeline caught an error; the handler closes the channel whatever the state.
    mutating func errorCaught() {
        switch self.state {
        case .awaitingHello:
            self.state = .closing(ClosingState(attached: false))
        case .open:
            self.state = .closing(ClosingState(attached: true))
        case .closing, .closed:
            break
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The channel is inactive; returns whether to detach the connection from the engine.
    mutating func channelInactive() -> Bool {
        let detach: Bool
        switch self.state {
        case .open:
            detach = true
        case .closing(let closing):
            detach = closing.attached
        case .awaitingHello, .closed:
            detach = false
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
        self.state = .closed
        return detach
    }

    /// The handler left the pipeline: what was never flushed, or never taken, is counted out, and the account is
    /// closed once.
    mutating func handlerRemoved() -> RemovedAction {
        let discarded = self.unflushedBytes + self.flushedBytes
        self.outboundBytes -= discarded
        self.unflushedBytes = 0
        self.flushedBytes = 0
        let closeAccount = self.accountOpen
        self.accountOpen = false
        return RemovedAction(discardedBytes: discarded, closeAccount: closeAccount)
    }

    // MARK: Inbound flow control

    /// Whether another frame may be handled now: not closing, and requests in flight and outbound bytes under
    /// their bounds.
    func canHandleFrames(inFlight: Int) -> Bool {
        !self.isClosing && !self.outboundPaused && inFlight < self.maxRequestsInFlight
    }

    /// The channel asks for a read; `hasWholeFrame` says whether a whole frame read before still waits.
    mutating func readRequested(inFlight: Int, hasWholeFrame: @autoclosure () -> Bool) -> ReadAction {
        if self.canHandleFrames(inFlight: inFlight), !hasWholeFrame() { return .read }
        self.readHeldBack = true
        return .holdBack
    }

    /// The frames that waited were handled: returns whether to do the read held back.
    mutating func readMayResume(inFlight: Int, hasWholeFrame: @autoclosure () -> Bool) -> Bool {
        guard self.readHeldBack, self.canHandleFrames(inFlight: inFlight), !hasWholeFrame() else { return false }
        self.readHeldBack = false
        return true
    }

    /// The uid has no room: returns whether to ask its account to wake this connection (once until woken, and
    /// not while closing).
    mutating func budgetExhausted() -> Bool {
        guard !self.waitingForBudget, !self.isClosing else { return false }
        self.waitingForBudget = true
        return true
    }

    /// The uid's account woke this connection: it has room again.
    mutating func budgetAvailable() {
        self.waitingForBudget = false
    }

    // MARK: Output

    /// A frame of `bytes` was written into the pipeline, not flushed yet.
    mutating func frameWritten(bytes: Int) -> FrameWrittenAction {
        self.outboundBytes += bytes
        self.unflushedBytes += bytes
        self.unflushed = true
        let pause = !self.outboundPaused && self.outboundBytes >= self.maxOutboundBytes
        if pause { self.outboundPaused = true }
        let schedule = !self.flushScheduled
        self.flushScheduled = true
        if pause { return .pauseReading(scheduleFlush: schedule) }
        return schedule ? .scheduleFlush : .none
    }

    /// The scheduled flush runs now.
    mutating func scheduledFlushRan() {
        self.flushScheduled = false
    }

    /// A flush is due: returns the bytes it sends (``flushedBytes`` until the kernel took them), `nil` when
    /// nothing was written since the last one.
    mutating func flushRequested() -> Int? {
        guard self.unflushed else { return nil }
        self.unflushed = false
        let bytes = self.unflushedBytes
        self.unflushedBytes = 0
        self.flushedBytes += bytes
        return bytes
    }

    /// The kernel took every byte flushed so far (or the channel closed: they are gone all the same). Counts
    /// them out of ``outboundBytes`` and returns how many they were: 0 when nothing flushed was waiting.
    mutating func flushedBytesTaken() -> Int {
        let bytes = self.flushedBytes
        self.flushedBytes = 0
        self.outboundBytes -= bytes
        return bytes
    }

    /// Whether reading resumes: it was paused at the outbound bound and the bytes drained to half of it.
    mutating func outboundDrained() -> Bool {
        guard self.outboundPaused, self.outboundBytes <= self.maxOutboundBytes / 2 else { return false }
        self.outboundPaused = false
        return true
    }

    // MARK: Events

    /// An event was refused (the subscriber's queue is full, the uid has no room, or it does not fit in a
    /// frame). Only an open connection is sent events; in any other state this changes nothing.
    mutating func eventRefused() {
        switch self.state {
        case .open(var open):
            self.state = .modifying
            open.eventsRefused = true
            self.state = .open(open)
        case .awaitingHello, .closing, .closed:
            break
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// Whether events were refused since the engine was last told there is room.
    var eventsRefused: Bool {
        if case .open(let open) = self.state { return open.eventsRefused }
        return false
    }

    /// The outbound bytes may have drained or the uid may have room: decides whether the engine is told there
    /// is room for events again. `roomForSnapshot` is asked only once the queue is back to half.
    mutating func checkEventsDrained(roomForSnapshot: @autoclosure () -> Bool) -> EventsDrainedAction {
        switch self.state {
        case .open(var open):
            guard open.eventsRefused, self.outboundBytes <= self.subscriberQueueBytes / 2 else { return .none }
            guard roomForSnapshot() else { return .waitForRoom }
            self.state = .modifying
            open.eventsRefused = false
            self.state = .open(open)
            return .tellEngine
        case .awaitingHello, .closing, .closed:
            return .none
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }
}
