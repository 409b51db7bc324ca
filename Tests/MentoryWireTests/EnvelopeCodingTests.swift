import Foundation
import MentoryWire
import NIOCore
import Testing

@Suite("Envelope coding")
struct EnvelopeCodingTests {
    @Test("an envelope written as a frame reads back identical")
    func roundTrip() throws {
        var request = Mentory_V1_Request()
        request.id = 42
        request.namespace = "diary"
        request.method = "list"
        request.body = .init([1, 2, 3])
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        var buffer = ByteBuffer()
        buffer.writeFrame(envelope)
        let frame = try #require(try LengthPrefixedFrameDecoder().nextFrame(from: &buffer))
        #expect(try Mentory_V1_Envelope(frame: frame) == envelope)
        #expect(buffer.readableBytes == 0)
    }

    @Test("garbage and empty payloads are malformed messages")
    func malformed() {
        #expect(throws: MalformedMessageError.self) {
            _ = try Mentory_V1_Envelope(frame: ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]))
        }
        #expect(throws: MalformedMessageError.self) {
            _ = try Mentory_V1_Envelope(frame: ByteBuffer())
        }
    }

    @Test("every error has a distinct stable code and a message")
    func errorCodes() {
        let errors: [MentoryError] = [
            .unsupportedVersion(requested: 9, supported: 1), .handshakeRequired, .malformedMessage("x"),
            .frameTooLarge(length: 2, maximum: 1), .truncatedFrame, .unknownNamespace("x"),
            .unknownMethod(namespace: "a", method: "b"), .invalidArgument("x"), .notFound("x"), .conflict("x"),
            .permissionDenied(namespace: "a", method: "b"), .duplicateRequestID(1), .tooManyRequests(limit: 1),
            .storageFailure("x"), .shuttingDown, .internal("x"), .alreadyHandshaken, .tooManyConnections("x"),
            .handshakeTimeout(seconds: 1),
        ]
        let codes = errors.map(\.wireError.code)
        #expect(Set(codes).count == errors.count)
        #expect(!codes.contains(0))
        #expect(errors.allSatisfy { !$0.message.isEmpty })
        #expect(MentoryError.permissionDenied(namespace: "diary", method: "delete").message.contains("diary.delete"))
    }
}

@Suite("The daemon's own error reasons")
struct DaemonReasonTests {
    @Test("each reason the daemon reports travels with its error and is documented in docs/PROTOCOL.md")
    func documentedAndSent() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let protocolText = try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        for reason in MentoryError.Reason.all {
            #expect(protocolText.contains("`\(reason)`"), "docs/PROTOCOL.md does not name reason \(reason)")
        }
        let denied = MentoryError.deniedOnBehalf(namespace: "diary", method: "list", chain: ["streaks", "moods"])
        #expect(denied.wireError.reason == MentoryError.Reason.deniedOnBehalf)
        #expect(denied.code == .permissionDenied)
        #expect(denied.message.contains("on your behalf by moods"))
        #expect(denied.message.contains("streaks -> moods -> diary.list"))
        let undeclared = MentoryError.pluginNotDeclared(namespace: "streaks", declared: [])
        #expect(undeclared.wireError.reason == MentoryError.Reason.pluginNotDeclared)
        #expect(undeclared.message.contains("declared: none"))
        #expect(MentoryError.notFound("x").wireError.reason.isEmpty)
    }
}
