import MentoryWire
import NIOCore
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
        #expect(first.frame == ByteBuffer(bytes: [1, 1]))
        #expect(inbound.hasWholeFrame, "looked at, not taken")
        inbound.consume(first.rest)
        let second = try #require(try inbound.next())
        #expect(second.frame == ByteBuffer(bytes: [2, 2, 2]))
        inbound.consume(second.rest)
        #expect(!inbound.hasWholeFrame)
        #expect(try inbound.next() == nil)
        #expect(inbound.unfinishedFrame() == .truncatedFrame(bufferedBytes: 5))
        inbound.append(ByteBuffer(bytes: [9, 9, 9]))
        let third = try #require(try inbound.next())
        #expect(third.frame == ByteBuffer(bytes: [9, 9, 9, 9]))
        inbound.consume(third.rest)
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

    @Test("the clock is read once per batch of frames")
    func batchClock() {
        var inbound = InboundFrames(maxFrameLength: 16)
        inbound.startBatch()
        let first = inbound.received()
        let second = inbound.received()
        #expect(first == second)
    }
}
