import MentoryWire
import Testing

@testable import MentoryServer

/// A machine with small bounds: 2 requests in flight, 100 outbound bytes, 40 bytes of events.
private func makeMachine() -> ConnectionStateMachine {
    ConnectionStateMachine(maxRequestsInFlight: 2, maxOutboundBytes: 100, subscriberQueueBytes: 40)
}

/// A machine past its handshake.
private func makeOpenMachine() -> ConnectionStateMachine {
    var machine = makeMachine()
    let step1 = machine.helloReceived(rejection: nil)
    #expect(step1 == .attach)
    return machine
}

@Suite("ConnectionStateMachine: events in, actions out")
struct ConnectionStateMachineTests {
    // MARK: Handshake

    @Test("a request or plugin reply before the Hello is refused HANDSHAKE_REQUIRED; after it, dispatched")
    func requestBeforeHello() {
        var machine = makeMachine()
        #expect(machine.isAwaitingHello)
        #expect(machine.requestReceived() == .refuse(.handshakeRequired))
        #expect(machine.pluginReplyReceived() == .refuse(.handshakeRequired))
        let step2 = machine.helloReceived(rejection: nil)
        #expect(step2 == .attach)
        #expect(machine.isOpen)
        #expect(!machine.isAwaitingHello)
        #expect(machine.requestReceived() == .dispatch)
        #expect(machine.pluginReplyReceived() == .dispatch)
    }

    @Test("a second Hello is refused ALREADY_HANDSHAKEN, whatever it says, and the connection stays open")
    func helloTwice() {
        var machine = makeOpenMachine()
        let step3 = machine.helloReceived(rejection: nil)
        #expect(step3 == .refuse(.alreadyHandshaken))
        let step4 = machine.helloReceived(rejection: .handshakeRequired)
        #expect(step4 == .refuse(.alreadyHandshaken))
        #expect(machine.isOpen)
    }

    @Test("a Hello that cannot be accepted fails the connection, which was never attached")
    func rejectedHello() {
        var machine = makeMachine()
        let error = MentoryError.unsupportedVersion(requested: 9, supported: WireProtocol.version)
        let step5 = machine.helloReceived(rejection: error)
        #expect(step5 == .fail(error))
        #expect(machine.isAwaitingHello)
        let step6 = machine.closeRequested()
        #expect(step6 == .close(detach: false))
        #expect(machine.isClosing)
        #expect(machine.requestReceived() == .refuse(.handshakeRequired))
        let step7 = machine.channelInactive()
        #expect(step7 == false)
    }

    // MARK: Closing

    @Test("closing an open connection detaches it once; closing twice does nothing the second time")
    func closeTwice() {
        var machine = makeOpenMachine()
        let step8 = machine.closeRequested()
        #expect(step8 == .close(detach: true))
        let step9 = machine.closeRequested()
        #expect(step9 == .none)
        let step10 = machine.inputClosed()
        #expect(!step10)
        let step11 = machine.channelInactive()
        #expect(step11 == false, "detached already")
        let step12 = machine.closeRequested()
        #expect(step12 == .none)
        #expect(machine.isClosing)
        #expect(!machine.isOpen)
    }

    @Test("after an error or the peer's end of input, the engine is told when the channel goes inactive")
    func detachOnInactive() {
        var errored = makeOpenMachine()
        errored.errorCaught()
        #expect(errored.isClosing)
        let step13 = errored.closeRequested()
        #expect(step13 == .none)
        let step14 = errored.channelInactive()
        #expect(step14 == true)
        let step15 = errored.channelInactive()
        #expect(step15 == false)

        var ended = makeOpenMachine()
        let step16 = ended.inputClosed()
        #expect(step16)
        let step17 = ended.inputClosed()
        #expect(!step17)
        let step18 = ended.channelInactive()
        #expect(step18 == true)

        var neverOpened = makeMachine()
        let step19 = neverOpened.inputClosed()
        #expect(step19)
        let step20 = neverOpened.channelInactive()
        #expect(step20 == false)
    }

    @Test("a connection closing with requests in flight handles no more frames, drains its bytes, and is removed once")
    func closeWhileRequestsInFlight() {
        var machine = makeOpenMachine()
        #expect(machine.canHandleFrames(inFlight: 1))
        let step21 = machine.frameWritten(bytes: 30)
        #expect(step21 == .scheduleFlush)
        let step22 = machine.closeRequested()
        #expect(step22 == .close(detach: true))
        // Requests still in flight finish, but no frame is handled and no read resumes.
        #expect(!machine.canHandleFrames(inFlight: 1))
        #expect(!machine.canHandleFrames(inFlight: 0))
        let step23 = machine.readRequested(inFlight: 0, hasWholeFrame: false)
        #expect(step23 == .holdBack)
        let step24 = machine.readMayResume(inFlight: 0, hasWholeFrame: false)
        #expect(!step24)
        // The closing frame is still written and flushed, and its bytes drain.
        let step25 = machine.frameWritten(bytes: 20)
        #expect(step25 == .none, "the flush is scheduled already")
        machine.scheduledFlushRan()
        let step26 = machine.flushRequested()
        #expect(step26 == 50)
        let step27 = machine.flushRequested()
        #expect(step27 == nil)
        let step28 = machine.frameWritten(bytes: 5)
        #expect(step28 == .scheduleFlush)
        let taken = machine.flushedBytesTaken()
        #expect(taken == 50)
        #expect(machine.outboundBytes == 5)
        let takenAgain = machine.flushedBytesTaken()
        #expect(takenAgain == 0, "counted out once")
        let step29 = machine.channelInactive()
        #expect(step29 == false)
        // Removed with 5 bytes never flushed: counted out, and the account closed once.
        let step30 = machine.handlerRemoved()
        #expect(step30 == .init(discardedBytes: 5, closeAccount: true))
        #expect(machine.outboundBytes == 0)
        let step31 = machine.handlerRemoved()
        #expect(step31 == .init(discardedBytes: 0, closeAccount: false))
        // A closing connection neither waits for its uid's budget nor takes events.
        let step32 = machine.budgetExhausted()
        #expect(!step32)
        machine.eventRefused()
        #expect(!machine.eventsRefused)
        let step33 = machine.checkEventsDrained(roomForSnapshot: true)
        #expect(step33 == .none)
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
        #expect(machine.canHandleFrames(inFlight: 0))
        let step35 = machine.frameWritten(bytes: 1)
        #expect(step35 == .pauseReading(scheduleFlush: false), "at the bound exactly")
        #expect(machine.outboundPaused)
        #expect(!machine.canHandleFrames(inFlight: 0))
        let step36 = machine.frameWritten(bytes: 10)
        #expect(step36 == .none, "paused once")
        let step37 = machine.readRequested(inFlight: 0, hasWholeFrame: false)
        #expect(step37 == .holdBack)
        let takenFirst = machine.flushedBytesTaken()
        #expect(takenFirst == 49, "only what was flushed")
        #expect(machine.outboundBytes == 61)
        let step39 = machine.outboundDrained()
        #expect(!step39, "61 is over half of 100")
        let step40 = machine.readMayResume(inFlight: 0, hasWholeFrame: false)
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
        #expect(machine.canHandleFrames(inFlight: 0))
        let step43 = machine.readMayResume(inFlight: 0, hasWholeFrame: true)
        #expect(step43 == false, "a whole frame waits still")
        let step44 = machine.readMayResume(inFlight: 0, hasWholeFrame: false)
        #expect(step44)
        let step45 = machine.readMayResume(inFlight: 0, hasWholeFrame: false)
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
        let step48 = machine.readRequested(inFlight: 1, hasWholeFrame: false)
        #expect(step48 == .read)
        let step49 = machine.readRequested(inFlight: 0, hasWholeFrame: true)
        #expect(step49 == .holdBack)
        #expect(!machine.canHandleFrames(inFlight: 2))
        let step50 = machine.readRequested(inFlight: 2, hasWholeFrame: false)
        #expect(step50 == .holdBack)
        let step51 = machine.readMayResume(inFlight: 2, hasWholeFrame: false)
        #expect(!step51)
        let step52 = machine.readMayResume(inFlight: 1, hasWholeFrame: false)
        #expect(step52)
    }

    @Test("a connection over its uid's budget asks to be woken once, until the account wakes it")
    func budgetWaitAndWake() {
        var machine = makeOpenMachine()
        let step53 = machine.budgetExhausted()
        #expect(step53)
        #expect(machine.waitingForBudget)
        let step54 = machine.budgetExhausted()
        #expect(!step54, "asked once until woken")
        machine.budgetAvailable()
        #expect(!machine.waitingForBudget)
        let step55 = machine.budgetExhausted()
        #expect(step55, "woken, it may wait again")
        let step56 = machine.closeRequested()
        #expect(step56 == .close(detach: true))
        machine.budgetAvailable()
        let step57 = machine.budgetExhausted()
        #expect(!step57, "a closing connection does not wait")
    }

    @Test("refused events are reported to the engine once the queue is back to half and the uid has room")
    func eventsDrained() {
        var machine = makeOpenMachine()
        let step58 = machine.checkEventsDrained(roomForSnapshot: true)
        #expect(step58 == .none, "no event was refused")
        let step59 = machine.frameWritten(bytes: 30)
        #expect(step59 == .scheduleFlush)
        machine.eventRefused()
        #expect(machine.eventsRefused)
        let step60 = machine.checkEventsDrained(roomForSnapshot: true)
        #expect(step60 == .none, "30 is over half of 40")
        machine.scheduledFlushRan()
        let step61 = machine.flushRequested()
        #expect(step61 == 30)
        let taken = machine.flushedBytesTaken()
        #expect(taken == 30)
        var asked = false
        let waited = machine.checkEventsDrained(
            roomForSnapshot: {
                asked = true
                return false
            }())
        #expect(waited == .waitForRoom)
        #expect(asked)
        #expect(machine.eventsRefused, "still refused until the engine is told")
        let step62 = machine.checkEventsDrained(roomForSnapshot: true)
        #expect(step62 == .tellEngine)
        #expect(!machine.eventsRefused)
        let step63 = machine.checkEventsDrained(roomForSnapshot: true)
        #expect(step63 == .none, "told once")
    }

    @Test("before the Hello, events are not taken and frames before the bound are handled")
    func awaitingHelloFlow() {
        var machine = makeMachine()
        machine.eventRefused()
        #expect(!machine.eventsRefused)
        #expect(machine.canHandleFrames(inFlight: 0))
        let step64 = machine.frameWritten(bytes: 100)
        #expect(step64 == .pauseReading(scheduleFlush: true))
        #expect(!machine.canHandleFrames(inFlight: 0))
    }
}
