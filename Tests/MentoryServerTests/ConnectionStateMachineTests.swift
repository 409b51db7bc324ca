import MentoryWire
import Testing

@testable import MentoryServer

/// A machine with small bounds: 2 requests in flight, 100 outbound bytes, 40 bytes of events, 30-byte frames.
private func makeMachine() -> ConnectionStateMachine {
    ConnectionStateMachine(maxRequestsInFlight: 2, maxOutboundBytes: 100, subscriberQueueBytes: 40, maxFrameLength: 30)
}

/// A Hello; by default one this server accepts.
private func hello(version: UInt32 = WireProtocol.version, clientName: String = "test") -> Mentory_V1_Hello {
    var hello = Mentory_V1_Hello()
    hello.protocolVersion = version
    hello.clientName = clientName
    return hello
}

/// A machine past its handshake.
private func makeOpenMachine() -> ConnectionStateMachine {
    var machine = makeMachine()
    let attached = machine.helloReceived(hello())
    #expect(attached == .attach)
    return machine
}

/// Dispatches request `id` and records it in flight, suspended, with its reservations.
private func startRequest(
    _ machine: inout ConnectionStateMachine, id: UInt64, replyBytes: Int = 10, snapshotBytes: Int = 0
) {
    let action = machine.requestReceived(id: id)
    #expect(action == .dispatch(queued: machine.requestsInFlight > 0))
    machine.requestSuspended(id: id, method: "test.method\(id)", replyBytes: replyBytes, snapshotBytes: snapshotBytes)
}

/// An event the uid's budget has room for.
private func event(_ machine: inout ConnectionStateMachine, bytes: Int, uidHasRoom: Bool = true)
    -> ConnectionStateMachine.EventAction
{
    machine.eventReady(frameBytes: bytes, payloadLength: bytes - 4) { _ in uidHasRoom }
}

@Suite("ConnectionStateMachine: events in, actions out")
struct ConnectionStateMachineTests {
    // MARK: Handshake

    @Test("a request or plugin reply before the Hello is refused HANDSHAKE_REQUIRED; after it, dispatched")
    func requestBeforeHello() {
        var machine = makeMachine()
        #expect(machine.isAwaitingHello)
        #expect(machine.requestReceived(id: 1) == .refuse(.handshakeRequired))
        #expect(machine.pluginReplyReceived() == .refuse(.handshakeRequired))
        let attached = machine.helloReceived(hello())
        #expect(attached == .attach)
        #expect(machine.isOpen)
        #expect(!machine.isAwaitingHello)
        #expect(machine.requestReceived(id: 1) == .dispatch(queued: false))
        #expect(machine.pluginReplyReceived() == .dispatch)
    }

    @Test("a second Hello is refused ALREADY_HANDSHAKEN, whatever it says, and the connection stays open")
    func helloTwice() {
        var machine = makeOpenMachine()
        let second = machine.helloReceived(hello())
        #expect(second == .refuse(.alreadyHandshaken))
        let wrongVersion = machine.helloReceived(hello(version: 99))
        #expect(wrongVersion == .refuse(.alreadyHandshaken))
        #expect(machine.isOpen)
    }

    @Test("a Hello that cannot be accepted fails the connection, which was never attached")
    func rejectedHello() throws {
        var machine = makeMachine()
        let failed = machine.helloReceived(hello(version: 9))
        #expect(failed == .fail(.unsupportedVersion(requested: 9, supported: WireProtocol.version)))
        #expect(machine.isAwaitingHello)
        let closing = machine.closeRequested()
        #expect(closing == .close(detach: false))
        #expect(machine.isClosing)
        #expect(machine.requestReceived(id: 1) == .refuse(.handshakeRequired))
        let detach = machine.channelInactive()
        #expect(detach == false)

        var longName = makeMachine()
        let name = String(repeating: "n", count: FieldLimits.clientName.maximum + 1)
        guard case .fail = longName.helloReceived(hello(clientName: name)) else {
            Issue.record("a client name over its limit is accepted")
            return
        }
        #expect(longName.isAwaitingHello)
    }

    @Test("the handshake timer starts once, and finds nothing to fail once the Hello came")
    func handshakeTimer() {
        var machine = makeMachine()
        let first = machine.handshakeTimerNeeded()
        #expect(first)
        let second = machine.handshakeTimerNeeded()
        #expect(!second, "started once")
        #expect(machine.isAwaitingHello, "the timer fails the connection when it fires now")
        let attached = machine.helloReceived(hello())
        #expect(attached == .attach)
        #expect(!machine.isAwaitingHello, "the timer does nothing when it fires now")
        let afterHello = machine.handshakeTimerNeeded()
        #expect(!afterHello)

        var closed = makeMachine()
        let detach = closed.channelInactive()
        #expect(!detach)
        #expect(!closed.isAwaitingHello)
        let afterClose = closed.handshakeTimerNeeded()
        #expect(!afterClose)
    }

    // MARK: Closing

    @Test("closing an open connection detaches it once; closing twice does nothing the second time")
    func closeTwice() {
        var machine = makeOpenMachine()
        let first = machine.closeRequested()
        #expect(first == .close(detach: true))
        let second = machine.closeRequested()
        #expect(second == .none)
        let inputClosed = machine.inputClosed()
        #expect(!inputClosed)
        let detach = machine.channelInactive()
        #expect(detach == false, "detached already")
        let third = machine.closeRequested()
        #expect(third == .none)
        #expect(machine.isClosing)
        #expect(!machine.isOpen)
    }

    @Test("after an error or the peer's end of input, the engine is told when the channel goes inactive")
    func detachOnInactive() {
        var errored = makeOpenMachine()
        errored.errorCaught()
        #expect(errored.isClosing)
        let close = errored.closeRequested()
        #expect(close == .none)
        let detach = errored.channelInactive()
        #expect(detach == true)
        let detachAgain = errored.channelInactive()
        #expect(detachAgain == false)

        var ended = makeOpenMachine()
        let inputClosed = ended.inputClosed()
        #expect(inputClosed)
        let inputClosedAgain = ended.inputClosed()
        #expect(!inputClosedAgain)
        let endedDetach = ended.channelInactive()
        #expect(endedDetach == true)

        var neverOpened = makeMachine()
        let neverOpenedClosed = neverOpened.inputClosed()
        #expect(neverOpenedClosed)
        let neverOpenedDetach = neverOpened.channelInactive()
        #expect(neverOpenedDetach == false)
    }

    @Test("a connection closing with requests in flight handles no more frames, drains its bytes, and is removed once")
    func closeWhileRequestsInFlight() {
        var machine = makeOpenMachine()
        startRequest(&machine, id: 1, replyBytes: 10, snapshotBytes: 20)
        #expect(machine.canHandleFrames)
        let written = machine.frameWritten(bytes: 30)
        #expect(written == .scheduleFlush)
        let close = machine.closeRequested()
        #expect(close == .close(detach: true))
        // The request in flight finishes, but no frame is handled and no read resumes.
        #expect(machine.requestsInFlight == 1)
        #expect(!machine.canHandleFrames)
        let read = machine.readRequested(hasWholeFrame: false, uidHasRoom: false)
        #expect(read == .holdBack(waitForBudget: false), "a closing connection does not wait for its uid")
        let resumed = machine.readMayResume(hasWholeFrame: false)
        #expect(!resumed)
        // Its reply is not sent, and its reservations are released, after the channel went inactive too.
        let detach = machine.channelInactive()
        #expect(detach == false)
        let response = machine.responseReady(id: 1)
        #expect(response == .finished(method: "test.method1", send: false, releaseBytes: 30))
        #expect(machine.requestsInFlight == 0)
        #expect(machine.requests.replyBytes == 0 && machine.requests.eventBytes == 0)
        let unknown = machine.responseReady(id: 1)
        #expect(unknown == .sendUnreserved(send: false))
        // The closing frame is still written and flushed, and its bytes drain.
        let closingFrame = machine.frameWritten(bytes: 20)
        #expect(closingFrame == .none, "the flush is scheduled already")
        machine.scheduledFlushRan()
        let flushed = machine.flushRequested()
        #expect(flushed == 50)
        let flushedAgain = machine.flushRequested()
        #expect(flushedAgain == nil)
        let late = machine.frameWritten(bytes: 5)
        #expect(late == .scheduleFlush)
        let taken = machine.flushedBytesTaken()
        #expect(taken == 50)
        #expect(machine.outboundBytes == 5)
        let takenAgain = machine.flushedBytesTaken()
        #expect(takenAgain == 0, "counted out once")
        // Removed with 5 bytes never flushed: counted out, and the account closed once.
        let removed = machine.handlerRemoved()
        #expect(removed == .init(discardedBytes: 5, closeAccount: true))
        #expect(machine.outboundBytes == 0)
        let removedAgain = machine.handlerRemoved()
        #expect(removedAgain == .init(discardedBytes: 0, closeAccount: false))
        // A closed connection takes no events.
        #expect(event(&machine, bytes: 8) == .drop)
        #expect(!machine.eventsRefused)
        let drained = machine.checkEventsDrained(snapshotBytes: 10, roomForSnapshot: true)
        #expect(drained == .none)
    }

    // MARK: Requests in flight

    @Test("requests in flight: a duplicate id is refused, later ones are queued, and each reservation is settled once")
    func requestsInFlight() {
        var machine = makeOpenMachine()
        startRequest(&machine, id: 1, replyBytes: 10)
        #expect(machine.requestReceived(id: 1) == .refuse(.duplicateRequestID(1)))
        startRequest(&machine, id: 2, replyBytes: 7, snapshotBytes: 20)
        #expect(machine.requests.replyBytes == 17)
        #expect(machine.requests.eventBytes == 20)
        #expect(!machine.canHandleFrames, "at maxRequestsInFlight")
        // A response for a request answered without a reservation is sent as it is.
        let unreserved = machine.responseReady(id: 9)
        #expect(unreserved == .sendUnreserved(send: true))
        let first = machine.responseReady(id: 1)
        #expect(first == .finished(method: "test.method1", send: true, releaseBytes: 10))
        #expect(machine.canHandleFrames)
        #expect(machine.requestReceived(id: 1) == .dispatch(queued: true), "its id is free again")
        // The subscription's snapshot used part of its reservation: only the rest is released.
        let snapshot = event(&machine, bytes: 12)
        #expect(snapshot == .write(releaseReserved: 12))
        let second = machine.responseReady(id: 2)
        #expect(second == .finished(method: "test.method2", send: true, releaseBytes: 7 + 8))
        #expect(machine.requests.replyBytes == 0 && machine.requests.eventBytes == 0)
        #expect(machine.requestReceived(id: 2) == .dispatch(queued: false))
    }

    @Test("a frame is handled while outbound bytes and reserved replies are under the bound and the uid has room")
    func frameReady() {
        var machine = makeOpenMachine()
        let handled = machine.frameReady(costsNoReply: false, uidHasRoom: true)
        #expect(handled == .handle)
        startRequest(&machine, id: 1, replyBytes: 60)
        let written = machine.frameWritten(bytes: 39)
        #expect(written == .scheduleFlush)
        let underBound = machine.frameReady(costsNoReply: false, uidHasRoom: true)
        #expect(underBound == .handle, "99 of 100")
        _ = machine.frameWritten(bytes: 1)
        let atBound = machine.frameReady(costsNoReply: false, uidHasRoom: true)
        #expect(atBound == .holdBack)
        let noReply = machine.frameReady(costsNoReply: true, uidHasRoom: false)
        #expect(noReply == .handle, "a PluginReply or Hello is handled regardless")
        let overBudget = machine.frameReady(costsNoReply: false, uidHasRoom: false)
        #expect(overBudget == .waitForBudget)
        #expect(machine.waitingForBudget)
        let stillOver = machine.frameReady(costsNoReply: false, uidHasRoom: false)
        #expect(stillOver == .holdBack, "the account is asked once until it wakes the connection")
        machine.budgetAvailable()
        let overAgain = machine.frameReady(costsNoReply: false, uidHasRoom: false)
        #expect(overAgain == .waitForBudget)
    }

    @Test("a plugin call is sent only while it keeps the outbound bytes under the bound, and only once open")
    func pluginCallBound() {
        var machine = makeMachine()
        #expect(!machine.pluginCallFits(bytes: 10))
        let attached = machine.helloReceived(hello())
        #expect(attached == .attach)
        _ = machine.frameWritten(bytes: 50)
        #expect(machine.pluginCallFits(bytes: 49))
        #expect(!machine.pluginCallFits(bytes: 50))
        _ = machine.closeRequested()
        #expect(!machine.pluginCallFits(bytes: 1))
    }

    // MARK: Back-pressure

    @Test("reading pauses when the outbound bytes reach the bound and resumes once they drain to half")
    func outboundBounds() {
        var machine = makeOpenMachine()
        let step34 = machine.frameWritten(bytes: 49)
        #expect(step34 == .scheduleFlush)
        machine.scheduledFlushRan()
        let flushed = machine.flushRequested()
        #expect(flushed == 49)
        let step35a = machine.frameWritten(bytes: 50)
        #expect(step35a == .scheduleFlush)
        #expect(!machine.outboundPaused)
        #expect(machine.canHandleFrames)
        let step35 = machine.frameWritten(bytes: 1)
        #expect(step35 == .pauseReading(scheduleFlush: false), "at the bound exactly")
        #expect(machine.outboundPaused)
        #expect(!machine.canHandleFrames)
        let step36 = machine.frameWritten(bytes: 10)
        #expect(step36 == .none, "paused once")
        let step37 = machine.readRequested(hasWholeFrame: false, uidHasRoom: true)
        #expect(step37 == .holdBack(waitForBudget: false))
        let takenFirst = machine.flushedBytesTaken()
        #expect(takenFirst == 49, "only what was flushed")
        #expect(machine.outboundBytes == 61)
        let step39 = machine.outboundDrained()
        #expect(!step39, "61 is over half of 100")
        let step40 = machine.readMayResume(hasWholeFrame: false)
        #expect(!step40)
        machine.scheduledFlushRan()
        let step38 = machine.flushRequested()
        #expect(step38 == 61)
        let takenSecond = machine.flushedBytesTaken()
        #expect(takenSecond == 61)
        let step41 = machine.outboundDrained()
        #expect(step41, "0 is under half")
        let step42 = machine.outboundDrained()
        #expect(!step42, "resumed once")
        #expect(machine.canHandleFrames)
        let step43 = machine.readMayResume(hasWholeFrame: true)
        #expect(step43 == false, "a whole frame waits still")
        let step44 = machine.readMayResume(hasWholeFrame: false)
        #expect(step44)
        let step45 = machine.readMayResume(hasWholeFrame: false)
        #expect(!step45, "the read held back is done once")
    }

    @Test("the first write of a tick schedules a flush, and pausing schedules one when none is due")
    func pauseSchedulesFlush() {
        var machine = makeOpenMachine()
        let step46 = machine.frameWritten(bytes: 100)
        #expect(step46 == .pauseReading(scheduleFlush: true))
        let step47 = machine.frameWritten(bytes: 1)
        #expect(step47 == .none)
    }

    @Test("frames wait at maxRequestsInFlight; the read held back resumes below it")
    func requestsInFlightBound() {
        var machine = makeOpenMachine()
        startRequest(&machine, id: 1)
        let step48 = machine.readRequested(hasWholeFrame: false, uidHasRoom: true)
        #expect(step48 == .read)
        let step49 = machine.readRequested(hasWholeFrame: true, uidHasRoom: true)
        #expect(step49 == .holdBack(waitForBudget: false))
        startRequest(&machine, id: 2)
        #expect(!machine.canHandleFrames)
        let step50 = machine.readRequested(hasWholeFrame: false, uidHasRoom: true)
        #expect(step50 == .holdBack(waitForBudget: false))
        let step51 = machine.readMayResume(hasWholeFrame: false)
        #expect(!step51)
        _ = machine.responseReady(id: 2)
        let step52 = machine.readMayResume(hasWholeFrame: false)
        #expect(step52)
    }

    @Test("a connection over its uid's budget asks to be woken once, until the account wakes it")
    func budgetWaitAndWake() {
        var machine = makeOpenMachine()
        let step53 = machine.readRequested(hasWholeFrame: true, uidHasRoom: false)
        #expect(step53 == .holdBack(waitForBudget: true))
        #expect(machine.waitingForBudget)
        let step54 = machine.readRequested(hasWholeFrame: true, uidHasRoom: false)
        #expect(step54 == .holdBack(waitForBudget: false), "asked once until woken")
        machine.budgetAvailable()
        #expect(!machine.waitingForBudget)
        let step55 = machine.readRequested(hasWholeFrame: true, uidHasRoom: false)
        #expect(step55 == .holdBack(waitForBudget: true), "woken, it may wait again")
        let step56 = machine.closeRequested()
        #expect(step56 == .close(detach: true))
        machine.budgetAvailable()
        let step57 = machine.readRequested(hasWholeFrame: true, uidHasRoom: false)
        #expect(step57 == .holdBack(waitForBudget: false), "a closing connection does not wait")
    }

    // MARK: Events

    @Test("events are refused when the queue is full, the uid has no room, or they do not fit in a frame")
    func eventRefusals() {
        var machine = makeOpenMachine()
        let large = machine.eventReady(frameBytes: 50, payloadLength: 30) { _ in true }
        #expect(large == .write(releaseReserved: 0), "an empty queue takes any event that fits in a frame")
        #expect(!machine.eventsRefused)
        _ = machine.frameWritten(bytes: 50)
        #expect(event(&machine, bytes: 8) == .refuse(waitForBudget: false), "58 is over 40")
        #expect(machine.eventsRefused)

        var budget = makeOpenMachine()
        #expect(event(&budget, bytes: 8, uidHasRoom: false) == .refuse(waitForBudget: true))
        #expect(event(&budget, bytes: 8, uidHasRoom: false) == .refuse(waitForBudget: false), "asked once")
        #expect(budget.eventsRefused)

        var tooLarge = makeOpenMachine()
        let refused = tooLarge.eventReady(frameBytes: 35, payloadLength: 31) { _ in true }
        #expect(refused == .refuseTooLarge)
        #expect(tooLarge.eventsRefused)
        #expect(tooLarge.outboundBytes == 0)
    }

    @Test("eventWritten decides and counts an event as eventReady then frameWritten do; off a channel it counts none")
    func eventWrittenInOneStep() {
        var machine = makeOpenMachine()
        var separate = makeOpenMachine()
        for bytes in [10, 12, 30] {
            let step = machine.eventWritten(frameBytes: bytes, payloadLength: bytes - 4, onChannel: true) { _ in true }
            let decided = event(&separate, bytes: bytes)
            let counted: ConnectionStateMachine.FrameWrittenAction? =
                decided == .write(releaseReserved: 0) ? separate.frameWritten(bytes: bytes) : nil
            #expect(step.action == decided)
            #expect(step.written == counted)
            #expect(machine.outboundBytes == separate.outboundBytes)
            #expect(machine.eventsRefused == separate.eventsRefused)
        }
        #expect(machine.outboundBytes == 22, "the 30-byte event was refused: 52 is over 40")

        var offChannel = makeOpenMachine()
        let step = offChannel.eventWritten(frameBytes: 10, payloadLength: 6, onChannel: false) { _ in true }
        #expect(step.action == .write(releaseReserved: 0))
        #expect(step.written == nil)
        #expect(offChannel.outboundBytes == 0)
    }

    @Test("refused events are reported to the engine once the queue is back to half and the uid has room")
    func eventsDrained() {
        var machine = makeOpenMachine()
        let step58 = machine.checkEventsDrained(snapshotBytes: 15, roomForSnapshot: true)
        #expect(step58 == .none, "no event was refused")
        let step59 = machine.frameWritten(bytes: 30)
        #expect(step59 == .scheduleFlush)
        #expect(event(&machine, bytes: 20) == .refuse(waitForBudget: false))
        #expect(machine.eventsRefused)
        let step60 = machine.checkEventsDrained(snapshotBytes: 15, roomForSnapshot: true)
        #expect(step60 == .none, "30 is over half of 40")
        machine.scheduledFlushRan()
        let step61 = machine.flushRequested()
        #expect(step61 == 30)
        let taken = machine.flushedBytesTaken()
        #expect(taken == 30)
        var asked = false
        let waited = machine.checkEventsDrained(
            snapshotBytes: 15,
            roomForSnapshot: {
                asked = true
                return false
            }())
        #expect(waited == .waitForBudget)
        #expect(asked)
        #expect(machine.eventsRefused, "still refused until the engine is told")
        machine.budgetAvailable()
        let step62 = machine.checkEventsDrained(snapshotBytes: 15, roomForSnapshot: true)
        #expect(step62 == .tellEngine)
        #expect(!machine.eventsRefused)
        #expect(machine.requests.eventBytes == 15, "the snapshot's bytes are reserved")
        let step63 = machine.checkEventsDrained(snapshotBytes: 15, roomForSnapshot: true)
        #expect(step63 == .none, "told once")
        // A reset uses up part of the reservation; what is left is released once the resets are taken.
        #expect(event(&machine, bytes: 10) == .write(releaseReserved: 10))
        let left = machine.resetsTaken(reserved: 15)
        #expect(left == 5)
        let leftAgain = machine.resetsTaken(reserved: 15)
        #expect(leftAgain == 0)
    }

    @Test("before the Hello, events are not taken and frames before the bound are handled")
    func awaitingHelloFlow() {
        var machine = makeMachine()
        #expect(event(&machine, bytes: 8) == .drop)
        #expect(!machine.eventsRefused)
        #expect(machine.canHandleFrames)
        let step64 = machine.frameWritten(bytes: 100)
        #expect(step64 == .pauseReading(scheduleFlush: true))
        #expect(!machine.canHandleFrames)
    }
}
