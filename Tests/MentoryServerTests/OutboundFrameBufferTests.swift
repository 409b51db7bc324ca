#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryEngine
import MentoryWire
import NIOCore
import NIOEmbedded
import Testing

@testable import MentoryServer

/// A frame of `payload` bytes, each `fill`.
private func frame(_ payload: Int, fill: UInt8 = 7) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeInteger(UInt32(payload))
    buffer.writeRepeatingByte(fill, count: payload)
    return buffer
}

@Suite("OutboundFrameBuffer: a tick's small frames, coalesced")
struct OutboundFrameBufferTests {
    @Test("a tick's only frame is kept as it is, sharing its storage")
    func firstFrameKept() throws {
        var buffer = OutboundFrameBuffer()
        #expect(buffer.isEmpty)
        #expect(buffer.take() == nil)
        let shared = frame(10)
        buffer.append(shared)
        #expect(!buffer.isOwned)
        #expect(buffer.readableBytes == 14)
        let takenOut = buffer.take()
        let taken = try #require(takenOut)
        #expect(taken == shared)
        taken.withUnsafeReadableBytes { takenBytes in
            shared.withUnsafeReadableBytes { sharedBytes in
                #expect(takenBytes.baseAddress == sharedBytes.baseAddress, "not copied")
            }
        }
        #expect(buffer.isEmpty)
    }

    @Test("the second frame starts a buffer of the connection's own, and the frames come out in order")
    func laterFramesCopied() throws {
        var buffer = OutboundFrameBuffer()
        let first = frame(3, fill: 1)
        buffer.append(first)
        buffer.append(frame(5, fill: 2))
        #expect(buffer.isOwned)
        buffer.appendOwned(reserving: 6) { bytes in
            bytes.writeInteger(UInt32(2))
            bytes.writeBytes([3, 3])
        }
        var expected = first
        expected.writeImmutableBuffer(frame(5, fill: 2))
        expected.writeInteger(UInt32(2))
        expected.writeBytes([3, 3])
        let takenOut = buffer.take()
        let taken = try #require(takenOut)
        #expect(taken == expected)
        #expect(first.readableBytes == 7, "the first frame, shared with others, is not written to")
        #expect(buffer.isEmpty)
        // The next tick starts again with its first frame kept as it is.
        buffer.append(frame(1))
        #expect(!buffer.isOwned)
    }

    @Test("a buffer of the connection's own is reused by the next tick once let go; a larger one is not kept")
    func spareBufferReused() throws {
        var buffer = OutboundFrameBuffer()
        /// Two frames into the buffer, then taken out, as a tick's flush does: the address of their bytes.
        func tick(
            _ fill: UInt8, secondPayload: Int = 5, body: (ByteBuffer) -> Void = { _ in }
        ) throws -> UnsafeRawPointer? {
            buffer.append(frame(3, fill: fill))
            buffer.append(frame(secondPayload, fill: fill))
            let takenOut = buffer.take()
            let taken = try #require(takenOut)
            #expect(taken.readableBytes == 4 + 3 + 4 + secondPayload)
            #expect(taken.getBytes(at: 4, length: 1) == [fill], "the tick's own bytes")
            body(taken)
            return taken.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
        }
        let first = try tick(1)
        // Were the first tick's storage freed, this would likely get it, and the next tick other memory.
        let blocker = ByteBufferAllocator().buffer(capacity: OutboundFrameBuffer.initialCapacity)
        let second = try tick(2)
        #expect(second == first, "the first tick's storage, let go, is reused")
        #expect(blocker.capacity >= OutboundFrameBuffer.initialCapacity)
        // Still held (a write the kernel has not taken): the next tick's buffer gets storage of its own.
        var held: ByteBuffer?
        let third = try tick(3) { held = $0 }
        let fourth = try tick(4)
        #expect(fourth != third, "bytes still held are not written over")
        #expect(held?.getBytes(at: 4, length: 1) == [3])
        held = nil
        // Grown past the spare's bound: not kept, so the next tick starts a buffer of the usual size.
        _ = try tick(5, secondPayload: OutboundFrameBuffer.maxSpareCapacity)
        _ = try tick(6) { #expect($0.capacity <= OutboundFrameBuffer.maxSpareCapacity) }
    }

    @Test("frames up to 8 KiB are coalesced; discarding drops what waits")
    func boundsAndDiscard() {
        #expect(OutboundFrameBuffer.coalesces(OutboundFrameBuffer.maxFrameBytes))
        #expect(!OutboundFrameBuffer.coalesces(OutboundFrameBuffer.maxFrameBytes + 1))
        var buffer = OutboundFrameBuffer()
        buffer.append(frame(1))
        buffer.append(frame(2))
        buffer.discard()
        #expect(buffer.isEmpty)
        #expect(!buffer.isOwned)
    }
}

@Suite("InboundFrames: the bytes read, split into frames as they are handled")
struct InboundFramesTests {
    @Test("a whole frame is looked at before it is taken; a frame cut short waits for its rest")
    func framesInOrder() throws {
        var inbound = InboundFrames(maxFrameLength: 16)
        var read = frame(2, fill: 1)
        read.writeImmutableBuffer(frame(3, fill: 2))
        read.writeInteger(UInt32(4))
        read.writeBytes([9])
        inbound.append(read)
        #expect(inbound.hasWholeFrame)
        let first = try #require(try inbound.next())
        #expect(first == ByteBuffer(bytes: [1, 1]))
        #expect(inbound.hasWholeFrame, "looked at, not taken")
        inbound.consume(first)
        let second = try #require(try inbound.next())
        #expect(second == ByteBuffer(bytes: [2, 2, 2]))
        inbound.consume(second)
        #expect(!inbound.hasWholeFrame)
        #expect(try inbound.next() == nil)
        #expect(inbound.unfinishedFrame() == .truncatedFrame(bufferedBytes: 5))
        inbound.append(ByteBuffer(bytes: [9, 9, 9]))
        let third = try #require(try inbound.next())
        #expect(third == ByteBuffer(bytes: [9, 9, 9, 9]))
        inbound.consume(third)
        #expect(inbound.unfinishedFrame() == nil)
        #expect(inbound.readableBytes == 0)
    }

    @Test("a length over the limit is an error, at once and at end of input")
    func frameTooLarge() {
        var inbound = InboundFrames(maxFrameLength: 16)
        var read = ByteBuffer()
        read.writeInteger(UInt32(17))
        inbound.append(read)
        #expect(throws: FrameError.frameTooLarge(length: 17, maximum: 16)) { try inbound.next() }
        #expect(inbound.unfinishedFrame() == .frameTooLarge(length: 17, maximum: 16))
        inbound.discard()
        #expect(inbound.readableBytes == 0)
        #expect(inbound.unfinishedFrame() == nil)
    }

    @Test("the clock is read once per batch of frames, and again in the next batch")
    func batchClock() {
        var inbound = InboundFrames(maxFrameLength: 16)
        let first = inbound.received()
        let second = inbound.received()
        #expect(first == second)
        #expect(inbound.endBatch() == first)
        let next = inbound.received()
        #expect(next >= first, "the next batch read the clock again")
        #expect(inbound.received() == next)
        #expect(inbound.endBatch() == next)
    }
}

/// A change (or `kind`) event of `topic`, numbered `sequence`, with a body of `bytes` bytes, as the engine shares it.
private func event(
    _ sequence: UInt64, topic: String = "mentor", kind: Mentory_V1_EventKind = .change, bytes: Int = 20
) -> SharedEvent {
    var event = Mentory_V1_Event()
    event.topic = topic
    event.sequence = sequence
    event.kind = kind
    event.body = Data(repeating: UInt8(truncatingIfNeeded: sequence), count: bytes)
    return SharedEvent(event)
}

/// The frames of `events`, back to back.
private func concatenated(_ events: [SharedEvent]) -> ByteBuffer {
    var bytes = ByteBuffer()
    for event in events { bytes.writeImmutableBuffer(event.frame) }
    return bytes
}

/// The address of `buffer`'s first readable byte.
private func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? {
    buffer.withUnsafeReadableBytes { $0.baseAddress }
}

@Suite("EventRuns: a tick's events of a topic, copied once for all its subscribers")
struct EventRunsTests {
    /// What `buffer` hands over, which must be something.
    private func taken(_ buffer: inout OutboundFrameBuffer) throws -> ByteBuffer {
        let frames = buffer.take()
        return try #require(frames)
    }

    @Test("subscribers holding the same first event share one run of the tick's events: the same bytes, one storage")
    func subscribersShareOneRun() throws {
        let flusher = TickFlusher(eventLoop: EmbeddedEventLoop())
        let events = [event(1), event(2), event(3)]
        var subscribers = Array(repeating: OutboundFrameBuffer(), count: 3)
        for shared in events {
            for index in subscribers.indices { subscribers[index].append(event: shared, sharing: flusher.eventRuns) }
        }
        var taken: [ByteBuffer] = []
        for index in subscribers.indices {
            #expect(subscribers[index].isSharedRun)
            #expect(subscribers[index].readableBytes == concatenated(events).readableBytes)
            taken.append(try self.taken(&subscribers[index]))
            #expect(subscribers[index].isEmpty)
        }
        for buffer in taken {
            #expect(buffer == concatenated(events))
            #expect(address(buffer) == address(taken[0]), "one run, not a copy each")
        }
        #expect(address(taken[0]) != address(events[0].frame), "the run is its own storage, not the engine's frame")
    }

    @Test("a subscriber whose tick began otherwise (a reply first) copies, and the others still share the run")
    func otherFirstFrameCopies() throws {
        let flusher = TickFlusher(eventLoop: EmbeddedEventLoop())
        var subscriber = OutboundFrameBuffer()
        var publisher = OutboundFrameBuffer()
        let reply = frame(6, fill: 9)
        publisher.append(reply)
        let events = [event(1), event(2)]
        for shared in events {
            subscriber.append(event: shared, sharing: flusher.eventRuns)
            publisher.append(event: shared, sharing: flusher.eventRuns)
        }
        #expect(subscriber.isSharedRun)
        #expect(publisher.isOwned)
        #expect(try self.taken(&subscriber) == concatenated(events))
        var expected = reply
        expected.writeImmutableBuffer(concatenated(events))
        #expect(try self.taken(&publisher) == expected)
    }

    @Test("a subscriber that missed an event of the run copies out what it holds; snapshots and resets are not shared")
    func partsAndOtherKindsAreCopied() throws {
        let flusher = TickFlusher(eventLoop: EmbeddedEventLoop())
        var missed = OutboundFrameBuffer()
        var all = OutboundFrameBuffer()
        let events = [event(1), event(2), event(3)]
        for (number, shared) in events.enumerated() {
            all.append(event: shared, sharing: flusher.eventRuns)
            if number < 2 { missed.append(event: shared, sharing: flusher.eventRuns) }
        }
        let whole = try self.taken(&all)
        let part = try self.taken(&missed)
        #expect(part == concatenated(Array(events[..<2])))
        #expect(address(part) != address(whole), "a part of a run is copied out, not kept alive whole")
        #expect(whole == concatenated(events))

        var subscriber = OutboundFrameBuffer()
        let snapshot = event(4, kind: .snapshot)
        subscriber.append(event: event(5), sharing: flusher.eventRuns)
        subscriber.append(event: snapshot, sharing: flusher.eventRuns)
        #expect(subscriber.isOwned)
        #expect(try self.taken(&subscriber) == concatenated([event(5), snapshot]))
    }

    @Test("the tick's end starts new runs; a run stops growing at its bound and later events are copied")
    func tickEndAndBound() throws {
        let flusher = TickFlusher(eventLoop: EmbeddedEventLoop())
        var subscriber = OutboundFrameBuffer()
        subscriber.append(event: event(1), sharing: flusher.eventRuns)
        subscriber.append(event: event(2), sharing: flusher.eventRuns)
        #expect(subscriber.isSharedRun)
        _ = subscriber.take()
        flusher.eventRuns.runs.endTick()
        // A new tick: its first two events make a run of their own.
        var next = OutboundFrameBuffer()
        next.append(event: event(3), sharing: flusher.eventRuns)
        next.append(event: event(4), sharing: flusher.eventRuns)
        #expect(next.isSharedRun)
        #expect(try self.taken(&next) == concatenated([event(3), event(4)]))
        flusher.eventRuns.runs.endTick()

        let large = (0..<9).map { event(10 + UInt64($0), bytes: 8_000) }
        var bounded = OutboundFrameBuffer()
        for shared in large { bounded.append(event: shared, sharing: flusher.eventRuns) }
        #expect(bounded.isOwned, "past \(EventRun.maxBytes) bytes the run stops and the rest is copied")
        #expect(try self.taken(&bounded) == concatenated(large))
    }
}
