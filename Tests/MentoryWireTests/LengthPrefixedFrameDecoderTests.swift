import MentoryWire
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

@Suite("Length-prefixed framing")
struct LengthPrefixedFrameDecoderTests {
    private func frame(_ payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(payload.count))
        buffer.writeBytes(payload)
        return buffer
    }

    @Test("a frame split at every byte boundary decodes to the same payload")
    func splitAtEveryBoundary() throws {
        let payload = Array("hello, mentor".utf8)
        let wire = self.frame(payload)
        for split in 0...wire.readableBytes {
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(LengthPrefixedFrameDecoder()))
            var first = wire.getSlice(at: 0, length: split)!
            var second = wire.getSlice(at: split, length: wire.readableBytes - split)!
            try channel.writeInbound(first)
            if split < wire.readableBytes {
                #expect(
                    try channel.readInbound(as: ByteBuffer.self) == nil,
                    "no frame before all bytes arrived (split \(split))")
                try channel.writeInbound(second)
            }
            let decoded = try #require(try channel.readInbound(as: ByteBuffer.self))
            #expect(Array(decoded.readableBytesView) == payload)
            #expect(try channel.finish().isClean)
            first.clear()
            second.clear()
        }
    }

    @Test("several frames in one read all come out, in order")
    func severalFramesInOneRead() throws {
        let payloads: [[UInt8]] = [Array("a".utf8), [], Array("three".utf8), Array(repeating: 7, count: 300)]
        var wire = ByteBuffer()
        for payload in payloads {
            var one = self.frame(payload)
            wire.writeBuffer(&one)
        }
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LengthPrefixedFrameDecoder()))
        try channel.writeInbound(wire)
        for payload in payloads {
            let decoded = try #require(try channel.readInbound(as: ByteBuffer.self))
            #expect(Array(decoded.readableBytesView) == payload)
        }
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(try channel.finish().isClean)
    }

    @Test("an oversized length is rejected from the prefix alone, before the payload arrives")
    func oversizedLength() throws {
        let decoder = LengthPrefixedFrameDecoder(maxFrameLength: 1024)
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32.max)
        #expect(throws: FrameError.frameTooLarge(length: Int(UInt32.max), maximum: 1024)) {
            _ = try decoder.nextFrame(from: &buffer)
        }
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LengthPrefixedFrameDecoder(maxFrameLength: 1024)))
        var header = ByteBuffer()
        header.writeInteger(UInt32(1025))
        #expect(throws: FrameError.frameTooLarge(length: 1025, maximum: 1024)) {
            try channel.writeInbound(header)
        }
    }

    @Test("a frame of exactly the maximum length is accepted")
    func exactlyMaximum() throws {
        let decoder = LengthPrefixedFrameDecoder(maxFrameLength: 16)
        var buffer = self.frame(Array(repeating: 1, count: 16))
        let frame = try #require(try decoder.nextFrame(from: &buffer))
        #expect(frame.readableBytes == 16)
    }

    @Test("a truncated frame at EOF is reported, not silently dropped")
    func truncatedAtEOF() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(LengthPrefixedFrameDecoder()))
        var partial = self.frame(Array("incomplete".utf8))
        partial.moveWriterIndex(to: partial.writerIndex - 3)
        try channel.writeInbound(partial)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(throws: FrameError.truncatedFrame(bufferedBytes: partial.readableBytes)) {
            try channel.finish()
        }
    }

    @Test("the decoder passes NIO's ByteToMessageDecoder verifier")
    func verifier() throws {
        let payload = Array("verified".utf8)
        var expected = ByteBuffer()
        expected.writeBytes(payload)
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [(self.frame(payload), [expected])],
            decoderFactory: { LengthPrefixedFrameDecoder() }
        )
    }
}
