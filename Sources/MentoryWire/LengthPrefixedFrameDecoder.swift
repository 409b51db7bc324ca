import NIOCore

/// Splits a byte stream into frames: a 4-byte big-endian length, then that many payload bytes.
///
/// The length is checked against ``maxFrameLength`` as soon as the four prefix bytes have
/// arrived, before any buffer is reserved for the payload.
public struct LengthPrefixedFrameDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = ByteBuffer

    /// The largest payload accepted, in bytes.
    public let maxFrameLength: Int

    /// Creates a decoder that rejects frames longer than `maxFrameLength` bytes.
    public init(maxFrameLength: Int = WireProtocol.defaultMaxFrameLength) {
        self.maxFrameLength = maxFrameLength
    }

    /// Extracts one frame from `buffer` if it holds a whole one.
    ///
    /// Returns `nil` when more bytes are needed.
    public func nextFrame(from buffer: inout ByteBuffer) throws(FrameError) -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else {
            return nil
        }
        guard length <= self.maxFrameLength else {
            throw .frameTooLarge(length: Int(length), maximum: self.maxFrameLength)
        }
        guard buffer.readableBytes >= WireProtocol.lengthPrefixSize + Int(length) else {
            return nil
        }
        buffer.moveReaderIndex(forwardBy: WireProtocol.lengthPrefixSize)
        return buffer.readSlice(length: Int(length))
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let frame = try self.nextFrame(from: &buffer) else {
            return .needMoreData
        }
        context.fireChannelRead(Self.wrapInboundOut(frame))
        return .continue
    }

    public mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        while try self.decode(context: context, buffer: &buffer) == .continue {}
        if buffer.readableBytes > 0 {
            let buffered = buffer.readableBytes
            buffer.moveReaderIndex(forwardBy: buffered)
            throw FrameError.truncatedFrame(bufferedBytes: buffered)
        }
        return .needMoreData
    }
}
