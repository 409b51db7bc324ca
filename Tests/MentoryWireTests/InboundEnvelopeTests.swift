import Foundation
import MentoryWire
import NIOCore
import SwiftProtobuf
import Testing

/// The request reader against SwiftProtobuf as the oracle: for every payload, ``InboundEnvelope`` must accept
/// what `Mentory_V1_Envelope(serializedBytes:)` accepts, with the same values, and refuse what it refuses with
/// the same reason.
@Suite("Inbound envelopes read like SwiftProtobuf reads them")
struct InboundEnvelopeTests {
    /// A field: its tag's bytes, then its value's.
    static func field(_ number: UInt64, _ wireType: UInt64, _ value: [UInt8]) -> [UInt8] {
        varint(number << 3 | wireType) + value
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    static func delimited(_ number: UInt64, _ bytes: [UInt8]) -> [UInt8] {
        field(number, 2, varint(UInt64(bytes.count)) + bytes)
    }

    static func request(_ fields: [UInt8]) -> [UInt8] { delimited(3, fields) }

    static func serialized(_ request: Mentory_V1_Request) -> [UInt8] {
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        return try! envelope.serializedBytes()
    }

    static var typical: Mentory_V1_Request {
        var request = Mentory_V1_Request()
        request.id = 300
        request.namespace = "diary"
        request.method = "add"
        request.body = Data([0x0A, 0x03, 0x61, 0x62, 0x63])
        request.timeoutMs = 1500
        return request
    }

    /// Payloads the fast reader takes itself, each named.
    static let fastCases: [(String, [UInt8])] = {
        var maximal = Mentory_V1_Request()
        maximal.id = .max
        maximal.namespace = "ns-ü"
        maximal.method = String(repeating: "m", count: 200)
        maximal.timeoutMs = .max
        maximal.body = Data(repeating: 7, count: 300)
        let ping = request(field(1, 0, [1]) + delimited(2, Array("session".utf8)) + delimited(3, Array("ping".utf8)))
        return [
            ("typical", serialized(typical)),
            ("maximal", serialized(maximal)),
            ("empty request", request([])),
            ("ping", ping),
            ("fields out of order", request(delimited(4, [9]) + delimited(3, [0x6D]) + field(1, 0, [5]))),
            ("later field wins", request(field(1, 0, [5]) + field(1, 0, [6]) + delimited(4, [1]) + delimited(4, []))),
            ("request given twice is merged", request(field(1, 0, [5])) + request(delimited(2, [0x6E]))),
            ("request twice, later values win", request(field(1, 0, [5])) + request(field(1, 0, [9]))),
            (
                "unknown fields of every wire type, both levels",
                field(20, 0, [0x80, 0x01]) + field(21, 1, Array(repeating: 0, count: 8))
                    + request(
                        field(9, 5, [1, 2, 3, 4]) + delimited(10, [1, 2]) + field(1, 0, [7])
                            + field(536_870_911, 0, [0]))
                    + delimited(22, [0xFF, 0xFF])
            ),
            (
                "known fields with another wire type are unknown fields",
                request(
                    field(1, 2, [1, 0x33]) + field(2, 0, [3]) + field(4, 5, [1, 2, 3, 4])
                        + field(5, 1, Array(repeating: 0, count: 8)))
                    + field(1, 0, [1]) + field(5, 5, [0, 0, 0, 0])
            ),
            (
                "a ten-byte varint keeps its low 64 bits",
                request(field(1, 0, Array(repeating: 0xFF, count: 9) + [0x7F]))
            ),
            ("an overlong zero", request(field(1, 0, [0x80, 0x80, 0x00]))),
            ("timeout truncated to 32 bits", request(field(5, 0, varint(0x1_0000_0005)))),
            ("a five-byte tag", request(varint(UInt64(536_870_911) << 3) + [0])),
        ]
    }()

    /// Payloads SwiftProtobuf decides: refusals and other kinds of envelope.
    static let otherCases: [(String, [UInt8])] = [
        ("empty payload", []),
        ("hello", delimited(1, field(1, 0, [1]) + delimited(2, Array("x".utf8)))),
        ("hello after request", request(field(1, 0, [1])) + delimited(1, [])),
        ("request after hello", delimited(1, []) + request(field(1, 0, [1]))),
        ("plugin reply", delimited(8, field(1, 0, [1]))),
        ("response", delimited(4, field(1, 0, [1]))),
        ("invalid UTF-8 in namespace", request(delimited(2, [0xC3, 0x28]))),
        ("invalid UTF-8 in method", request(delimited(3, [0xED, 0xA0, 0x80]))),
        ("invalid UTF-8 overwritten later", request(delimited(3, [0xFF]) + delimited(3, [0x61]))),
        ("eleven-byte varint", request(field(1, 0, Array(repeating: 0xFF, count: 10) + [0x01]))),
        ("truncated varint", request(field(1, 0, [0xFF]))),
        ("length past the end", request(delimited(4, [1, 2])).dropLast()),
        ("inner length past the request", request(field(4, 2, [5, 1, 2])) + [3, 4, 5]),
        ("field number 0", request([0x00, 0x00])),
        ("wire type 6", request([0x0E, 0x00])),
        ("wire type 7", [0x1F]),
        ("end group alone", request([0x0C])),
        ("group as unknown field", request(field(9, 3, field(1, 0, [1])) + field(9, 4, []) + field(1, 0, [4]))),
        ("fifth tag byte over 15", request([0x80, 0x80, 0x80, 0x80, 0x10, 0x00])),
        ("six-byte tag", request([0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00])),
        ("truncated tag", request([0x80])),
        ("truncated fixed64", field(21, 1, [0, 0, 0])),
        ("truncated fixed32", request(field(9, 5, [0]))),
        ("garbage", [0xFF, 0xFF, 0xFF]),
    ]

    /// What SwiftProtobuf makes of `payload`, in the terms ``InboundEnvelope`` uses.
    enum Outcome: Equatable {
        case request(id: UInt64, namespace: String, method: String, timeoutMs: UInt32, body: [UInt8])
        case other(Mentory_V1_Envelope)
        case refused(String)
    }

    static func oracle(_ payload: [UInt8]) -> Outcome {
        do {
            let envelope = try Mentory_V1_Envelope(frame: ByteBuffer(bytes: payload))
            if case .request(let request) = envelope.kind {
                return .request(
                    id: request.id, namespace: request.namespace, method: request.method, timeoutMs: request.timeoutMs,
                    body: Array(request.body))
            }
            return .other(envelope)
        } catch {
            return .refused(error.reason)
        }
    }

    static func inbound(_ payload: [UInt8]) -> Outcome {
        // Padding around the payload: the body is a slice of the frame, which need not start at index 0.
        var buffer = ByteBuffer(bytes: [0xEE, 0xEE] + payload + [0xEE])
        buffer.moveReaderIndex(forwardBy: 2)
        buffer.moveWriterIndex(to: buffer.writerIndex - 1)
        do {
            switch try InboundEnvelope(frame: buffer) {
            case .request(let request):
                return .request(
                    id: request.id, namespace: request.namespace, method: request.method, timeoutMs: request.timeoutMs,
                    body: Array(request.body.readableBytesView))
            case .other(let envelope):
                return .other(envelope)
            }
        } catch {
            return .refused(error.reason)
        }
    }

    @Test("requests are read without SwiftProtobuf, to the same values", arguments: fastCases)
    func fast(_ name: String, _ payload: [UInt8]) {
        let oracle = Self.oracle(payload)
        guard case .request = oracle else {
            Issue.record("\(name): SwiftProtobuf does not read a request: \(oracle)")
            return
        }
        #expect(Self.inbound(payload) == oracle, "\(name)")
        // The fast reader took it (no fallback): the body is the frame's own storage.
        let frame = ByteBuffer(bytes: payload)
        guard case .request(let request) = try? InboundEnvelope(frame: frame) else {
            Issue.record("\(name): not read as a request")
            return
        }
        let sharesStorage = frame.withUnsafeReadableBytes { frameBytes in
            request.body.withUnsafeReadableBytes { body in
                body.isEmpty
                    || (frameBytes.baseAddress! <= body.baseAddress!
                        && body.baseAddress! < frameBytes.baseAddress! + frameBytes.count)
            }
        }
        #expect(sharesStorage, "\(name): the body was copied")
    }

    @Test("other payloads, valid or not, come out as SwiftProtobuf has them", arguments: otherCases)
    func other(_ name: String, _ payload: [UInt8]) {
        #expect(Self.inbound(payload) == Self.oracle(payload), "\(name)")
    }

    @Test("every truncation and every single-byte change of the cases agrees with SwiftProtobuf")
    func mutations() {
        var checked = 0
        for (name, payload) in Self.fastCases + Self.otherCases where payload.count < 64 {
            for length in 0..<payload.count {
                let truncated = Array(payload.prefix(length))
                #expect(Self.inbound(truncated) == Self.oracle(truncated), "\(name) cut to \(length) bytes")
                checked += 1
            }
            for index in payload.indices {
                for value: UInt8 in [0x00, 0x01, 0x02, 0x05, 0x0A, 0x12, 0x1A, 0x22, 0x7F, 0x80, 0xC3, 0xFF] {
                    var mutated = payload
                    mutated[index] = value
                    #expect(Self.inbound(mutated) == Self.oracle(mutated), "\(name), byte \(index) set to \(value)")
                    checked += 1
                }
            }
        }
        #expect(checked > 1_000)
    }
}
