import MentoryWire

/// The protocol state of one connection, as a value: events in, actions out.
///
/// ``Connection`` stores one and mutates it in place. For each thing that happens on the connection
/// (a Hello, a frame ready to be handled, a request dispatched or answered, an event to deliver, a frame
/// written, bytes taken by the kernel, a read asked for, the uid's budget freed, a close) it calls one of the
/// mutating methods here and performs the action returned: the engine calls, the framing, the encoding, the
/// uid's account and every I/O stay in the connection. The machine holds no references, so it is tested without
/// any I/O and costs no allocation beyond its table of requests in flight.
///
/// It owns every bound of the connection (requests in flight, outbound bytes, the subscriber's queue of
/// events, the plugin-call bound, the frame limit for events) and the data they are checked against.
///
/// The lifecycle is one ``State``: ``State/awaitingHello(_:)`` → ``State/open(_:)`` → ``State/closing(_:)`` →
/// ``State/closed(_:)``. The requests in flight with their reservations (``RequestsInFlight``) live inside the
/// open, closing and closed states: a request is dispatched only once open, but it may finish after the
/// connection started closing, and its reservation is settled then. The output side (bytes in the pipeline,
/// whether reading is paused for them, whether a flush is due) and the input side (a read held back, a wait
/// for the uid's budget) hold in every state: a connection still writes its errors before its Hello and its
/// last frame while it closes.
struct ConnectionStateMachine {
    /// Where the connection is in its life, with what it holds there.
    enum State {
        /// Connected; only a Hello is accepted. Requests are answered HANDSHAKE_REQUIRED.
        case awaitingHello(AwaitingHelloState)
        /// Handshaken: the engine knows the connection (it is attached), requests are dispatched.
        case open(OpenState)
        /// Closing after an error, the peer's end of input, a failure or a shutdown: no frame is handled.
        case closing(ClosingState)
        /// The channel is inactive and the engine no longer knows the connection.
        case closed(ClosedState)
        /// Only while a method changes the payload of the state in place, so that the payload has one
        /// owner and is not copied.
        case modifying
    }

    /// What a connection waiting for its Hello has.
    struct AwaitingHelloState {
        /// Whether the handshake timer was started (it is started once).
        var timerStarted = false
    }

    /// What only an open connection has.
    struct OpenState {
        var requests = RequestsInFlight()
        /// Whether an event was refused since the engine was last told there is room for events.
        var eventsRefused = false
    }

    /// What a closing connection still has.
    struct ClosingState {
        var requests: RequestsInFlight
        /// Whether the engine still knows the connection: it is detached at once by a failure, and once the
        /// channel is inactive after an error or the peer's end of input.
        var attached: Bool
    }

    /// What a closed connection still has: requests finishing after the close settle their reservations.
    struct ClosedState {
        var requests: RequestsInFlight
    }

    /// The requests being computed, and the bytes reserved in the uid's account for what they and the
    /// engine's resets will send.
    struct RequestsInFlight {
        /// A request being computed: its `namespace.method` for error messages, and the bytes reserved for it.
        struct Request {
            var method: String
            /// Reserved for the reply, settled to its real size once it is encoded.
            var replyBytes: Int
            /// Reserved for the snapshots a `session.subscribe` queues (part of ``eventBytes``).
            var snapshotBytes: Int
        }

        /// The requests in flight, by id.
        var byID: [UInt64: Request] = [:]
        /// Bytes reserved for the replies of the requests in flight.
        var replyBytes = 0
        /// Bytes reserved for snapshots and resets being taken; the events they become use it up.
        var eventBytes = 0
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

    /// What to do with the next whole frame read.
    enum FrameAction: Equatable {
        /// Take it out of the bytes read and handle it.
        case handle
        /// Leave it where it is: the outbound bytes with the replies reserved are at their bound, or the uid
        /// has no room and its account will wake the connection already. A reply or the drain resumes it.
        case holdBack
        /// Leave it where it is, and ask the uid's account to wake the connection once it has room.
        case waitForBudget
    }

    /// What to do with a request.
    enum RequestAction: Equatable {
        /// Hand it to the engine; `queued` when requests are in flight ahead of it.
        case dispatch(queued: Bool)
        /// Answer it with this error instead.
        case refuse(MentoryError)
    }

    /// What to do with a plugin's reply.
    enum PluginReplyAction: Equatable {
        /// Hand it to the engine.
        case dispatch
        /// Answer it with this connection error instead.
        case refuse(MentoryError)
    }

    /// What to do with the response to a request.
    enum ResponseAction: Equatable {
        /// The request was not in flight here (it was answered without a reservation): send the response if
        /// `send`.
        case sendUnreserved(send: Bool)
        /// The request finished: send its response if `send` (then learn its size for `method`), and release
        /// `releaseBytes` of its reservations from the uid's account after that.
        case finished(method: String, send: Bool, releaseBytes: Int)
    }

    /// What to do with an event for this connection's subscriptions.
    enum EventAction: Equatable {
        /// Refuse it: the connection is not open (nothing else changes).
        case drop
        /// Refuse it: it would not fit in a frame. Events are refused until the engine is told there is room.
        case refuseTooLarge
        /// Refuse it: the subscriber's queue or the uid's budget is full; ask the uid's account to wake the
        /// connection if `waitForBudget`.
        case refuse(waitForBudget: Bool)
        /// Write it, then release `releaseReserved` bytes of the reservation for snapshots and resets it used.
        case write(releaseReserved: Int)
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
        /// Hold the read back until there is room; it is done when reading resumes. Ask the uid's account to
        /// wake the connection if `waitForBudget`.
        case holdBack(waitForBudget: Bool)
    }

    /// What to do once the outbound bytes may have drained far enough for the events refused.
    enum EventsDrainedAction: Equatable {
        /// Nothing: no event was refused, the connection is not open, or the queue is not back to half yet.
        case none
        /// The queue is back to half but the uid has no room for the snapshot: ask the account to wake the
        /// connection.
        case waitForBudget
        /// The snapshot's bytes are reserved: charge them to the uid and tell the engine there is room for events
        /// again (it sends resets).
        case tellEngine
    }

    /// What to do when the connection loses its transport.
    struct RemovedAction: Equatable {
        /// Written but never flushed, or flushed but never taken: nothing else will count these out, so they are
        /// counted out here.
        var discardedBytes: Int
        /// Whether to tell the uid's account that the connection is gone (once).
        var closeAccount: Bool
    }

    private(set) var state = State.awaitingHello(AwaitingHelloState())
    /// At most this many requests in flight before frames wait.
    let maxRequestsInFlight: Int
    /// At this many outbound bytes requests stop and the socket is not read; reading resumes at half. A plugin
    /// call is sent only while it keeps the outbound bytes under it.
    let maxOutboundBytes: Int
    /// Events are refused once the outbound bytes pass this; the engine is told at half.
    let subscriberQueueBytes: Int
    /// The largest frame payload: a larger event is refused.
    let maxFrameLength: Int

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

    init(maxRequestsInFlight: Int, maxOutboundBytes: Int, subscriberQueueBytes: Int, maxFrameLength: Int) {
        self.maxRequestsInFlight = maxRequestsInFlight
        self.maxOutboundBytes = maxOutboundBytes
        self.subscriberQueueBytes = subscriberQueueBytes
        self.maxFrameLength = maxFrameLength
    }

    init(_ configuration: ServerConfiguration) {
        self.init(
            maxRequestsInFlight: configuration.maxRequestsInFlight,
            maxOutboundBytes: configuration.maxOutboundBytes,
            subscriberQueueBytes: configuration.subscriberQueueBytes,
            maxFrameLength: configuration.maxFrameLength)
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

    /// Whether the connection still waits for its Hello: the handshake timer, when it fires, fails it then.
    var isAwaitingHello: Bool {
        if case .awaitingHello = self.state { return true }
        return false
    }

    /// The channel is active: returns whether to start the handshake timer (once, and only before the Hello).
    mutating func handshakeTimerNeeded() -> Bool {
        guard case .awaitingHello(let awaiting) = self.state, !awaiting.timerStarted else { return false }
        self.state = .awaitingHello(AwaitingHelloState(timerStarted: true))
        return true
    }

    /// A Hello arrived.
    mutating func helloReceived(_ hello: Mentory_V1_Hello) -> HelloAction {
        switch self.state {
        case .awaitingHello:
            if let rejection = Self.rejection(of: hello) { return .fail(rejection) }
            self.state = .open(OpenState())
            return .attach
        case .open, .closing, .closed:
            // A second Hello, whatever it says (frames are not handled while closing: this is for completeness).
            return .refuse(.alreadyHandshaken)
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// What is wrong with `hello`, if anything: a protocol version this server does not speak, or a client
    /// name over its limit.
    static func rejection(of hello: Mentory_V1_Hello) -> MentoryError? {
        guard hello.protocolVersion == WireProtocol.version else {
            return .unsupportedVersion(requested: hello.protocolVersion, supported: WireProtocol.version)
        }
        do {
            try FieldLimits.clientName.check(hello.clientName)
        } catch {
            return error
        }
        return nil
    }

    /// The connection is to be closed with an error (a protocol error, a timeout, a shutdown).
    mutating func closeRequested() -> CloseAction {
        switch self.state {
        case .awaitingHello:
            self.state = .closing(ClosingState(requests: RequestsInFlight(), attached: false))
            return .close(detach: false)
        case .open(let open):
            self.state = .closing(ClosingState(requests: open.requests, attached: false))
            return .close(detach: true)
        case .closing, .closed:
            return .none
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The peer closed its side (after the frames it sent whole were handled); returns whether to close.
    mutating func inputClosed() -> Bool {
        self.closeAttached()
    }

    /// The transport failed; the connection closes it whatever the state.
    mutating func errorCaught() {
        _ = self.closeAttached()
    }

    /// Moves to closing, the engine still knowing the connection if it was open; returns whether it moved.
    private mutating func closeAttached() -> Bool {
        switch self.state {
        case .awaitingHello:
            self.state = .closing(ClosingState(requests: RequestsInFlight(), attached: false))
            return true
        case .open(let open):
            self.state = .closing(ClosingState(requests: open.requests, attached: true))
            return true
        case .closing, .closed:
            return false
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The channel is inactive; returns whether to detach the connection from the engine.
    mutating func channelInactive() -> Bool {
        switch self.state {
        case .awaitingHello:
            self.state = .closed(ClosedState(requests: RequestsInFlight()))
            return false
        case .open(let open):
            self.state = .closed(ClosedState(requests: open.requests))
            return true
        case .closing(let closing):
            self.state = .closed(ClosedState(requests: closing.requests))
            return closing.attached
        case .closed:
            return false
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The connection lost its transport: what was never flushed, or never taken, is counted out, and the account is
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

    // MARK: Requests in flight

    /// The requests in flight and the reservations, in whichever state holds them (none before the Hello).
    var requests: RequestsInFlight {
        switch self.state {
        case .open(let open): return open.requests
        case .closing(let closing): return closing.requests
        case .closed(let closed): return closed.requests
        case .awaitingHello: return RequestsInFlight()
        case .modifying: preconditionFailure("the connection state was left being modified")
        }
    }

    /// How many requests are in flight.
    var requestsInFlight: Int {
        switch self.state {
        case .open(let open): return open.requests.byID.count
        case .closing(let closing): return closing.requests.byID.count
        case .closed(let closed): return closed.requests.byID.count
        case .awaitingHello: return 0
        case .modifying: preconditionFailure("the connection state was left being modified")
        }
    }

    /// The bytes reserved for the replies of the requests in flight.
    var reservedReplyBytes: Int {
        switch self.state {
        case .open(let open): return open.requests.replyBytes
        case .closing(let closing): return closing.requests.replyBytes
        case .closed(let closed): return closed.requests.replyBytes
        case .awaitingHello: return 0
        case .modifying: preconditionFailure("the connection state was left being modified")
        }
    }

    /// Changes the requests in flight in place, in whichever state holds them; `nil` before the Hello.
    private mutating func modifyRequests<Result>(_ body: (inout RequestsInFlight) -> Result) -> Result? {
        switch self.state {
        case .open(var open):
            self.state = .modifying
            let result = body(&open.requests)
            self.state = .open(open)
            return result
        case .closing(var closing):
            self.state = .modifying
            let result = body(&closing.requests)
            self.state = .closing(closing)
            return result
        case .closed(var closed):
            self.state = .modifying
            let result = body(&closed.requests)
            self.state = .closed(closed)
            return result
        case .awaitingHello:
            return nil
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// A request arrived: it is dispatched once the connection is open and its id is not in flight already.
    func requestReceived(id: UInt64) -> RequestAction {
        guard case .open(let open) = self.state else { return .refuse(.handshakeRequired) }
        if open.requests.byID.isEmpty { return .dispatch(queued: false) }
        if open.requests.byID[id] != nil { return .refuse(.duplicateRequestID(id)) }
        return .dispatch(queued: true)
    }

    /// A request dispatched suspended: it is in flight until its response, with `replyBytes` reserved for its
    /// reply and `snapshotBytes` for the snapshots it queues. The connection charges both to the uid.
    mutating func requestSuspended(id: UInt64, method: String, replyBytes: Int, snapshotBytes: Int) {
        let recorded: Void? = self.modifyRequests { requests in
            requests.byID[id] = RequestsInFlight.Request(
                method: method, replyBytes: replyBytes, snapshotBytes: snapshotBytes)
            requests.replyBytes += replyBytes
            requests.eventBytes += snapshotBytes
        }
        precondition(recorded != nil, "a request is dispatched only once the connection is open")
    }

    /// The response to request `id` is ready.
    mutating func responseReady(id: UInt64) -> ResponseAction {
        let send = !self.isClosing
        let finished = self.modifyRequests { requests -> (String, Int)? in
            guard let request = requests.byID.removeValue(forKey: id) else { return nil }
            requests.replyBytes -= request.replyBytes
            let snapshotLeft = min(requests.eventBytes, request.snapshotBytes)
            requests.eventBytes -= snapshotLeft
            return (request.method, request.replyBytes + snapshotLeft)
        }
        guard let request = finished ?? nil else { return .sendUnreserved(send: send) }
        return .finished(method: request.0, send: send, releaseBytes: request.1)
    }

    /// A plugin's reply arrived.
    func pluginReplyReceived() -> PluginReplyAction {
        self.isOpen ? .dispatch : .refuse(.handshakeRequired)
    }

    /// Whether a plugin call of `bytes` may be written: the connection is open and the call keeps its outbound
    /// bytes under ``maxOutboundBytes``, so that the plugin's own replies are always read.
    func pluginCallFits(bytes: Int) -> Bool {
        self.isOpen && self.outboundBytes + bytes < self.maxOutboundBytes
    }

    // MARK: Inbound flow control

    /// Whether another frame may be handled now: not closing, and requests in flight and outbound bytes under
    /// their bounds.
    var canHandleFrames: Bool {
        !self.isClosing && !self.outboundPaused && self.requestsInFlight < self.maxRequestsInFlight
    }

    /// A whole frame was read and ``canHandleFrames`` holds. A `PluginReply` or `Hello` (`costsNoReply`) is
    /// handled regardless; anything else only while the outbound bytes with the replies reserved are under
    /// ``maxOutboundBytes`` and the uid has room.
    mutating func frameReady(costsNoReply: Bool, uidHasRoom: @autoclosure () -> Bool) -> FrameAction {
        if costsNoReply { return .handle }
        let uidHasRoom = uidHasRoom()
        if uidHasRoom, self.outboundBytes + self.reservedReplyBytes < self.maxOutboundBytes { return .handle }
        return !uidHasRoom && self.startWaitingForBudget() ? .waitForBudget : .holdBack
    }

    /// The channel asks for a read; `hasWholeFrame` says whether a whole frame read before still waits.
    mutating func readRequested(hasWholeFrame: @autoclosure () -> Bool, uidHasRoom: @autoclosure () -> Bool)
        -> ReadAction
    {
        if self.canHandleFrames, !hasWholeFrame() { return .read }
        self.readHeldBack = true
        return .holdBack(waitForBudget: !uidHasRoom() && self.startWaitingForBudget())
    }

    /// The frames that waited were handled: returns whether to do the read held back.
    mutating func readMayResume(hasWholeFrame: @autoclosure () -> Bool) -> Bool {
        guard self.readHeldBack, self.canHandleFrames, !hasWholeFrame() else { return false }
        self.readHeldBack = false
        return true
    }

    /// The uid has no room: returns whether to ask its account to wake this connection (once until woken, and
    /// not while closing).
    private mutating func startWaitingForBudget() -> Bool {
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

    /// An event of `frameBytes` (its payload `payloadLength`) is to be delivered; `uidHasRoom` says whether
    /// the uid's budget takes the frame, given the bytes this connection reserved for snapshots and resets.
    mutating func eventReady(frameBytes: Int, payloadLength: Int, uidHasRoom: (_ ownReserved: Int) -> Bool)
        -> EventAction
    {
        // Only the reservation is read: the open state is not copied (its requests would be retained) unless it
        // changes, which most events do not make it do.
        guard case .open(let open) = self.state else { return .drop }
        let reserved = open.requests.eventBytes
        let action: EventAction
        if payloadLength > self.maxFrameLength {
            action = .refuseTooLarge
        } else if self.outboundBytes > 0, self.outboundBytes + frameBytes > self.subscriberQueueBytes {
            action = .refuse(waitForBudget: false)
        } else if !uidHasRoom(reserved) {
            action = .refuse(waitForBudget: self.startWaitingForBudget())
        } else {
            // A snapshot or reset being taken had its room reserved: the event uses it up.
            let used = min(reserved, frameBytes)
            guard used > 0 else { return .write(releaseReserved: 0) }
            self.modifyOpen { $0.requests.eventBytes -= used }
            return .write(releaseReserved: used)
        }
        self.modifyOpen { $0.eventsRefused = true }
        return action
    }

    /// Changes the open state in place; it must be open.
    private mutating func modifyOpen(_ body: (inout OpenState) -> Void) {
        guard case .open(var open) = self.state else { return }
        self.state = .modifying
        body(&open)
        self.state = .open(open)
    }

    /// An event the engine hands over, decided as ``eventReady(frameBytes:payloadLength:uidHasRoom:)`` decides it
    /// and, when it is written on a channel (`onChannel`), its frame counted as ``frameWritten(bytes:)`` counts it
    /// (`written`, else `nil`): in one step, so that a delivered event costs its connection one access to the machine
    /// (every access to a class's stored property is an exclusivity check), not two.
    mutating func eventWritten(
        frameBytes: Int, payloadLength: Int, onChannel: Bool, uidHasRoom: (_ ownReserved: Int) -> Bool
    ) -> (action: EventAction, written: FrameWrittenAction?) {
        let action = self.eventReady(frameBytes: frameBytes, payloadLength: payloadLength, uidHasRoom: uidHasRoom)
        guard onChannel, case .write = action else { return (action, nil) }
        return (action, self.frameWritten(bytes: frameBytes))
    }

    /// Whether events were refused since the engine was last told there is room.
    var eventsRefused: Bool {
        if case .open(let open) = self.state { return open.eventsRefused }
        return false
    }

    /// The outbound bytes may have drained or the uid may have room: decides whether the engine is told there
    /// is room for events again, reserving `snapshotBytes` for the resets it sends. `roomForSnapshot` is asked
    /// only once the queue is back to half.
    mutating func checkEventsDrained(snapshotBytes: Int, roomForSnapshot: @autoclosure () -> Bool)
        -> EventsDrainedAction
    {
        switch self.state {
        case .open(var open):
            guard open.eventsRefused, self.outboundBytes <= self.subscriberQueueBytes / 2 else { return .none }
            guard roomForSnapshot() else { return self.startWaitingForBudget() ? .waitForBudget : .none }
            self.state = .modifying
            open.eventsRefused = false
            open.requests.eventBytes += snapshotBytes
            self.state = .open(open)
            return .tellEngine
        case .awaitingHello, .closing, .closed:
            return .none
        case .modifying:
            preconditionFailure("the connection state was left being modified")
        }
    }

    /// The engine took the resets ``checkEventsDrained(snapshotBytes:roomForSnapshot:)`` reserved `reserved`
    /// bytes for: returns what is left of the reservation, to release from the uid.
    mutating func resetsTaken(reserved: Int) -> Int {
        self.modifyRequests { requests in
            let left = min(requests.eventBytes, reserved)
            requests.eventBytes -= left
            return left
        } ?? 0
    }
}
