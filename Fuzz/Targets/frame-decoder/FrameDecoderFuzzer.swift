// libFuzzer target `frame-decoder`: the length-prefixed framing and envelope decoding.
//
// Input layout (see Fuzz/make-corpus.py, which writes seeds in this layout):
//
//   byte 0       bits 0-2: which maximum frame length to use (`maxFrameLengths`)
//                bits 3-5: how to cut the stream into reads (`chunkLimits`)
//   byte 1       seed for the read sizes
//   bytes 2...   the byte stream a peer sends
//
// The stream goes through `LengthPrefixedFrameDecoder` twice, cut into reads at the same points:
// once through `nextFrame(from:)` over an accumulating buffer, and once through
// `ByteToMessageHandler` in an `EmbeddedChannel`, as the server's pipeline does, ending with EOF.
// Both must agree exactly with a straightforward reference parser of the whole stream: the same
// frames in the same order, then the same ending (clean, frame too large, or truncated). Every
// frame must be at most the maximum, and every frame that decodes as an `Envelope` must carry a
// message and survive a serialize/decode round trip and a `writeFrame`/`nextFrame` round trip.
// The daemon's own request reader (`InboundEnvelope`) must make of every frame what SwiftProtobuf makes,
// and its own event writer (`writeEventFrame`) must write every event as `writeFrame` writes its envelope.
//
// Allocation "per the length field": the script runs the target with `-malloc_limit_mb`, so a
// decoder that reserved what a hostile 4 GiB prefix announces would be reported as a crash.

import MentoryWire
import NIOCore
import NIOEmbedded
import SwiftProtobuf

/// Maximum frame lengths the harness picks from; the first is the daemon's default.
private let maxFrameLengths = [WireProtocol.defaultMaxFrameLength, 0, 1, 4, 7, 64, 300, 65_536]

/// The largest read, in bytes, for each chunking mode; `Int.max` means the whole stream in one read.
private let chunkLimits = [Int.max, 1, 2, 3, 5, 16, 64, 1024]

/// How a byte stream ends, as far as framing is concerned.
private enum Ending: Equatable, CustomStringConvertible {
    case clean
    case frameTooLarge(length: Int)
    case truncated(bufferedBytes: Int)

    var description: String {
        switch self {
        case .clean: "clean"
        case .frameTooLarge(let length): "frameTooLarge(\(length))"
        case .truncated(let buffered): "truncated(\(buffered))"
        }
    }
}

/// What the whole stream decodes to, by the protocol's definition.
private func referenceParse(_ bytes: [UInt8], maximum: Int) -> (frames: [[UInt8]], ending: Ending) {
    var frames: [[UInt8]] = []
    var index = 0
    while true {
        let remaining = bytes.count - index
        if remaining == 0 { return (frames, .clean) }
        if remaining < 4 { return (frames, .truncated(bufferedBytes: remaining)) }
        var length = 0
        for byte in bytes[index..<index + 4] { length = length << 8 | Int(byte) }
        if length > maximum { return (frames, .frameTooLarge(length: length)) }
        if remaining - 4 < length { return (frames, .truncated(bufferedBytes: remaining)) }
        frames.append(Array(bytes[index + 4..<index + 4 + length]))
        index += 4 + length
    }
}

/// A small deterministic generator so the read sizes follow from the input.
private struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Cuts `count` bytes into reads of 1...limit bytes.
private func readSizes(count: Int, limit: Int, seed: UInt8) -> [Int] {
    guard limit != .max else { return count == 0 ? [] : [count] }
    var random = SplitMix(state: UInt64(seed) &+ UInt64(count) &* 31)
    var sizes: [Int] = []
    var left = count
    while left > 0 {
        let size = min(left, 1 + Int(random.next() % UInt64(limit)))
        sizes.append(size)
        left -= size
    }
    return sizes
}

/// Reports a broken invariant and aborts, so libFuzzer records the input as a crash.
private func fail(_ message: String) -> Never {
    // fatalError prints the message and traps; libFuzzer reports it as a crash and saves the input.
    fatalError("frame-decoder invariant violated: \(message)")
}

/// Decodes with `nextFrame(from:)` over a buffer that accumulates the reads.
private func decodeDirectly(_ stream: [UInt8], reads: [Int], maximum: Int) -> (frames: [[UInt8]], ending: Ending) {
    let decoder = LengthPrefixedFrameDecoder(maxFrameLength: maximum)
    var buffer = ByteBuffer()
    var frames: [[UInt8]] = []
    var offset = 0
    for size in reads {
        buffer.writeBytes(stream[offset..<offset + size])
        offset += size
        while true {
            let frame: ByteBuffer?
            do {
                frame = try decoder.nextFrame(from: &buffer)
            } catch {
                switch error {
                case .frameTooLarge(let length, let reportedMaximum):
                    guard reportedMaximum == maximum else {
                        fail("frameTooLarge reports maximum \(reportedMaximum), not \(maximum)")
                    }
                    guard length > maximum else {
                        fail("frameTooLarge for \(length) bytes, within the maximum \(maximum)")
                    }
                    return (frames, .frameTooLarge(length: length))
                case .truncatedFrame:
                    fail("nextFrame(from:) threw truncatedFrame, which only decodeLast may throw")
                }
            }
            guard let frame else { break }
            guard frame.readableBytes <= maximum else {
                fail("a frame of \(frame.readableBytes) bytes came out of a decoder whose maximum is \(maximum)")
            }
            frames.append(Array(frame.readableBytesView))
        }
        // Nothing may be reserved for a payload that has not arrived: the buffer only ever holds
        // what was written into it (ByteBuffer rounds capacity up to a power of two).
        guard buffer.capacity <= max(1024, 2 * offset) else {
            fail("buffer capacity \(buffer.capacity) after only \(offset) bytes arrived")
        }
    }
    let left = buffer.readableBytes
    return (frames, left == 0 ? .clean : .truncated(bufferedBytes: left))
}

/// Decodes through `ByteToMessageHandler` in an `EmbeddedChannel`, as the server's pipeline does.
private func decodeInChannel(_ stream: [UInt8], reads: [Int], maximum: Int) -> (frames: [[UInt8]], ending: Ending) {
    let channel = EmbeddedChannel(handler: ByteToMessageHandler(LengthPrefixedFrameDecoder(maxFrameLength: maximum)))
    var frames: [[UInt8]] = []
    func drain() {
        while let frame = try? channel.readInbound(as: ByteBuffer.self) {
            guard frame.readableBytes <= maximum else {
                fail("the channel passed on a frame of \(frame.readableBytes) bytes; the maximum is \(maximum)")
            }
            frames.append(Array(frame.readableBytesView))
        }
    }
    func ending(for error: any Error) -> Ending {
        switch error {
        case FrameError.frameTooLarge(let length, let reportedMaximum):
            guard reportedMaximum == maximum, length > maximum else {
                fail("bad frameTooLarge(\(length), \(reportedMaximum)) for maximum \(maximum)")
            }
            return .frameTooLarge(length: length)
        case FrameError.truncatedFrame(let buffered):
            return .truncated(bufferedBytes: buffered)
        default:
            fail("unexpected error from the framing pipeline: \(error)")
        }
    }
    var offset = 0
    for size in reads {
        var read = channel.allocator.buffer(capacity: size)
        read.writeBytes(stream[offset..<offset + size])
        offset += size
        do {
            try channel.writeInbound(read)
        } catch {
            drain()
            _ = try? channel.finish(acceptAlreadyClosed: true)
            return (frames, ending(for: error))
        }
        drain()
    }
    // EOF: the handler runs decodeLast, which reports a partial frame.
    do {
        _ = try channel.finish()
        drain()
        return (frames, .clean)
    } catch {
        drain()
        return (frames, ending(for: error))
    }
}

/// Checks that the daemon's own reader, `InboundEnvelope(frame:)`, makes of one frame what SwiftProtobuf makes
/// of it: the same refusal, the same request (its body the frame narrowed to its bytes), or the same other envelope.
private func checkInbound(_ frame: ByteBuffer) {
    let reference: Result<Mentory_V1_Envelope, MalformedMessageError>
    do {
        reference = .success(try Mentory_V1_Envelope(frame: frame))
    } catch {
        reference = .failure(error)
    }
    let inbound: InboundEnvelope
    do {
        inbound = try InboundEnvelope(frame: frame)
    } catch {
        guard case .failure(let expected) = reference, expected.reason == error.reason else {
            fail("InboundEnvelope refused what SwiftProtobuf makes \(reference): \(error.reason)")
        }
        return
    }
    guard case .success(let envelope) = reference else {
        fail("InboundEnvelope accepted what SwiftProtobuf refuses: \(reference)")
    }
    switch inbound {
    case .request(let request):
        // Field by field: SwiftProtobuf keeps unknown fields, which the daemon's reader skips.
        guard case .request(let expected) = envelope.kind, request.id == expected.id,
            request.namespace == expected.namespace, request.method == expected.method,
            request.timeoutMs == expected.timeoutMs, request.body.readableBytesView.elementsEqual(expected.body)
        else {
            fail("InboundEnvelope read a request where SwiftProtobuf reads \(envelope)")
        }
    case .other(let other):
        guard other == envelope, other.kind != nil else {
            fail("InboundEnvelope read \(other) where SwiftProtobuf reads \(envelope)")
        }
        if case .request = other.kind { fail("InboundEnvelope left a request as another kind") }
    }
}

/// Checks what `Envelope(frame:)` makes of one frame.
private func checkEnvelope(_ payload: [UInt8]) {
    var frame = ByteBuffer()
    frame.writeBytes(payload)
    checkInbound(frame)
    let envelope: Mentory_V1_Envelope
    do {
        envelope = try Mentory_V1_Envelope(frame: frame)
    } catch {
        guard !error.reason.isEmpty else { fail("MalformedMessageError with an empty reason") }
        return
    }
    guard envelope.kind != nil else { fail("Envelope(frame:) accepted an envelope without a message") }

    // Serialize/decode round trip.
    let bytes: [UInt8]
    do {
        bytes = try envelope.serializedBytes()
    } catch {
        fail("a decoded envelope does not serialize: \(error)")
    }
    guard let again = try? Mentory_V1_Envelope(serializedBytes: bytes), again == envelope else {
        fail("a decoded envelope does not survive a serialize/decode round trip")
    }

    // writeFrame/nextFrame round trip with the default maximum.
    var wire = ByteBuffer()
    wire.writeFrame(envelope)
    guard wire.readableBytes == 4 + bytes.count else {
        fail("writeFrame wrote \(wire.readableBytes) bytes for \(bytes.count)")
    }
    if bytes.count <= WireProtocol.defaultMaxFrameLength {
        let decoder = LengthPrefixedFrameDecoder()
        guard let reframed = try? decoder.nextFrame(from: &wire), wire.readableBytes == 0,
            let decoded = try? Mentory_V1_Envelope(frame: reframed), decoded == envelope
        else {
            fail("an envelope does not survive a writeFrame/nextFrame round trip")
        }
    }

    // An event's frame as a publish writes it, by hand (writeEventFrame): byte for byte what writeFrame writes.
    if case .event(let event) = envelope.kind, envelope.unknownFields.data.isEmpty {
        var byHand = ByteBuffer()
        byHand.writeEventFrame(event)
        var reference = ByteBuffer()
        reference.writeFrame(envelope)
        guard byHand == reference else { fail("writeEventFrame differs from writeFrame for \(event)") }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrameDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let input = UnsafeBufferPointer(start: data, count: size)
    let maximum = maxFrameLengths[Int(input[0] & 0x7)]
    let limit = chunkLimits[Int((input[0] >> 3) & 0x7)]
    let stream = Array(input[2...])
    let reads = readSizes(count: stream.count, limit: limit, seed: input[1])

    let expected = referenceParse(stream, maximum: maximum)
    let direct = decodeDirectly(stream, reads: reads, maximum: maximum)
    guard direct.frames == expected.frames, direct.ending == expected.ending else {
        fail(
            "nextFrame(from:) gave \(direct.frames.count) frames ending \(direct.ending); "
                + "expected \(expected.frames.count) ending \(expected.ending)"
        )
    }
    let piped = decodeInChannel(stream, reads: reads, maximum: maximum)
    guard piped.frames == expected.frames, piped.ending == expected.ending else {
        fail(
            "ByteToMessageHandler gave \(piped.frames.count) frames ending \(piped.ending); "
                + "expected \(expected.frames.count) ending \(expected.ending)"
        )
    }
    for frame in expected.frames {
        checkEnvelope(frame)
    }
    return 0
}
