import Foundation
import MentoryWire
import NIOCore
import Testing

@testable import MentoryClient

/// The core both clients drive, alone: bytes in, outcomes out, no socket.
@Suite("The client's protocol core")
struct ClientProtocolCoreTests {
    /// A core whose calls are tagged with a name, so that an answer says which call it answered.
    typealias Core = ClientProtocolCore<String>

    /// A core that sent its `Hello` and (unless `welcomed` is false) read a `Welcome`.
    static func core(maxFrameLength: Int = 1024, welcomed: Bool = true) -> Core {
        var core = Core(clientName: "core-tests", maxFrameLength: maxFrameLength)
        _ = core.hello()
        if welcomed {
            core.receive(frame(welcome()))
            _ = core.nextInbound()
        }
        return core
    }

    static func welcome(version: UInt32 = WireProtocol.version) -> Mentory_V1_Envelope {
        var envelope = Mentory_V1_Envelope()
        envelope.welcome = Mentory_V1_Welcome.with {
            $0.protocolVersion = version
            $0.serverVersion = "core-tests"
        }
        return envelope
    }

    static func response(_ response: Mentory_V1_Response) -> Mentory_V1_Envelope {
        var envelope = Mentory_V1_Envelope()
        envelope.response = response
        return envelope
    }

    static func connectionError(_ code: Mentory_V1_ErrorCode, closing: Bool) -> Mentory_V1_Envelope {
        var envelope = Mentory_V1_Envelope()
        envelope.connectionError = Mentory_V1_ConnectionError.with {
            $0.closing = closing
            $0.error = Mentory_V1_Error(code: code, message: "refused")
        }
        return envelope
    }

    static func frame(_ envelopes: Mentory_V1_Envelope...) -> ByteBuffer {
        var buffer = ByteBuffer()
        for envelope in envelopes { buffer.writeFrame(envelope) }
        return buffer
    }

    /// Starts a call tagged `tag` and returns its id.
    static func call(_ core: inout Core, _ tag: String, timeout: Duration? = nil) throws -> UInt64 {
        try core.startCall(namespace: "session", method: "ping", body: Data(tag.utf8), timeout: timeout) { _ in tag }
            .id
    }

    @Test("the Hello names the protocol version and the client, and a Welcome of that version opens the connection")
    func handshake() {
        var core = Core(clientName: "core-tests", maxFrameLength: 1024)
        let hello = core.hello()
        #expect(hello.hello.protocolVersion == WireProtocol.version)
        #expect(hello.hello.clientName == "core-tests")
        #expect(core.welcome == nil)
        core.receive(Self.frame(Self.welcome()))
        guard case .welcomed(let welcome) = core.nextInbound() else {
            Issue.record("expected the welcome")
            return
        }
        #expect(welcome.serverVersion == "core-tests")
        #expect(core.welcome == welcome)
        #expect(core.nextInbound().isNone)
        // A second Welcome changes nothing.
        core.receive(Self.frame(Self.welcome(version: 9)))
        guard case .ignored = core.nextInbound() else {
            Issue.record("expected a second welcome to be ignored")
            return
        }
        #expect(core.welcome == welcome)
    }

    @Test("a Welcome of another protocol version ends the connection, and the calls sent behind the Hello with it")
    func wrongWelcomeVersion() throws {
        var core = Self.core(welcomed: false)
        _ = try Self.call(&core, "pipelined")
        core.receive(Self.frame(Self.welcome(version: WireProtocol.version + 1)))
        guard case .closed(let ending) = core.nextInbound() else {
            Issue.record("expected the connection to end")
            return
        }
        let expected = MentoryClientError.malformedReply(
            "the daemon speaks protocol version \(WireProtocol.version + 1), this client version \(WireProtocol.version)"
        )
        #expect(ending.reason == expected)
        #expect(ending.pendingCalls == ["pipelined"])
        #expect(core.welcome == nil)
        #expect(throws: expected) { try Self.call(&core, "after") }
    }

    @Test("the daemon refusing the Hello (unsupported version) ends the handshake with its error")
    func helloRefused() {
        var core = Self.core(welcomed: false)
        core.receive(Self.frame(Self.connectionError(.unsupportedVersion, closing: true)))
        guard case .closed(let ending) = core.nextInbound() else {
            Issue.record("expected the connection to end")
            return
        }
        #expect(
            ending.reason
                == .remote(code: UInt32(Mentory_V1_ErrorCode.unsupportedVersion.rawValue), message: "refused"))
        #expect(core.closeReason == ending.reason)
        #expect(core.nextInbound().isNone)
    }

    @Test("requests are numbered from 1 and carry the timeout in whole milliseconds, at least 1")
    func requestEncoding() throws {
        var core = Self.core()
        let first = try core.startCall(
            namespace: "diary", method: "get", body: Data([1, 2]), timeout: .milliseconds(1500)
        ) { _ in "first" }
        #expect(first.id == 1)
        #expect(first.envelope.request.id == 1)
        #expect(first.envelope.request.namespace == "diary")
        #expect(first.envelope.request.method == "get")
        #expect(first.envelope.request.body == Data([1, 2]))
        #expect(first.envelope.request.timeoutMs == 1500)
        let second = try core.startCall(
            namespace: "session", method: "ping", body: Data(), timeout: .microseconds(10),
            pendingCall: { _ in "second" })
        #expect(second.id == 2)
        #expect(second.envelope.request.timeoutMs == 1)
        let third = try core.startCall(namespace: "session", method: "ping", body: Data(), timeout: nil) { _ in nil }
        #expect(third.id == 3)
        #expect(third.envelope.request.timeoutMs == 0)
        #expect(core.pendingCallCount == 2)
        #expect(MentoryClientError.timedOut(after: .milliseconds(300)) == .timedOut(seconds: 0.3))
    }

    @Test("each response answers the call of its id, in whatever order they come")
    func responsesMatchedToIDs() throws {
        var core = Self.core()
        let first = try Self.call(&core, "first")
        let second = try Self.call(&core, "second")
        let third = try Self.call(&core, "third")
        core.receive(
            Self.frame(
                Self.response(.failure(id: second, error: Mentory_V1_Error(code: .notFound, message: "no such entry"))),
                Self.response(.success(id: first, body: Data("one".utf8))),
                Self.response(Mentory_V1_Response.with { $0.id = third })))
        var answers: [String: Result<Data, MentoryClientError>] = [:]
        while let inbound = core.nextInbound() {
            guard case .answered(let id, let call, let result) = inbound else {
                Issue.record("expected answers only, got \(inbound)")
                return
            }
            #expect([first: "first", second: "second", third: "third"][id] == call)
            answers[call] = result
        }
        #expect(answers["first"] == .success(Data("one".utf8)))
        #expect(
            answers["second"]
                == .failure(.remote(code: UInt32(Mentory_V1_ErrorCode.notFound.rawValue), message: "no such entry")))
        #expect(answers["third"] == .success(Data()))
        #expect(core.pendingCallCount == 0)
    }

    @Test("a response to an id nobody waits for is unmatched and skipped: the connection stays usable")
    func unmatchedResponses() throws {
        var core = Self.core()
        let abandoned = try Self.call(&core, "timed out")
        #expect(core.abandonCall(abandoned) == "timed out")
        let waiting = try Self.call(&core, "waiting")
        core.receive(
            Self.frame(
                Self.response(.success(id: abandoned, body: Data("late".utf8))),
                Self.response(.success(id: 1000, body: Data("never asked".utf8))),
                Self.response(.success(id: waiting, body: Data("mine".utf8)))))
        guard case .unmatchedResponse(let late) = core.nextInbound(),
            case .unmatchedResponse(let stray) = core.nextInbound(),
            case .answered(waiting, "waiting", .success(let body)) = core.nextInbound()
        else {
            Issue.record("expected two unmatched responses, then the answer")
            return
        }
        #expect(late == abandoned)
        #expect(stray == 1000)
        #expect(body == Data("mine".utf8))
        #expect(core.closeReason == nil)
    }

    @Test("a frame longer than the limit ends the connection from its length prefix alone")
    func oversizedFrame() throws {
        var core = Self.core(maxFrameLength: 64)
        _ = try Self.call(&core, "waiting")
        var prefix = ByteBuffer()
        prefix.writeInteger(UInt32(65))
        core.receive(prefix)
        guard case .closed(let ending) = core.nextInbound() else {
            Issue.record("expected the connection to end")
            return
        }
        #expect(
            ending.reason == .connectionClosed(reason: FrameError.frameTooLarge(length: 65, maximum: 64).description))
        #expect(ending.pendingCalls == ["waiting"])
        // Nothing more is read: the stream can no longer be split into frames.
        core.receive(Self.frame(Self.response(.success(id: 1, body: Data()))))
        #expect(core.nextInbound().isNone)
        #expect(core.bufferedBytes == 0)
        #expect(core.inputEnded().reason == ending.reason)
    }

    @Test("a frame split across reads is put back together; several frames in one read come one by one")
    func reassembly() throws {
        var core = Self.core()
        let id = try Self.call(&core, "split")
        let bytes = Self.frame(Self.response(.success(id: id, body: Data("across reads".utf8))))
        for index in 0..<(bytes.readableBytes - 1) {
            core.receive(bytes.getSlice(at: index, length: 1)!)
            #expect(core.nextInbound().isNone)
        }
        core.receive(bytes.getSlice(at: bytes.readableBytes - 1, length: 1)!)
        guard case .answered(id, "split", .success(let body)) = core.nextInbound() else {
            Issue.record("expected the answer once its last byte arrived")
            return
        }
        #expect(body == Data("across reads".utf8))
        #expect(core.bufferedBytes == 0)
    }

    @Test("events and forwarded plugin calls are delivered in order; messages only clients send are ignored")
    func eventsAndPluginCalls() {
        var core = Self.core()
        var event = Mentory_V1_Envelope()
        event.event = Mentory_V1_Event.with {
            $0.topic = "diary"
            $0.sequence = 7
        }
        var pluginCall = Mentory_V1_Envelope()
        pluginCall.pluginCall = Mentory_V1_PluginCall.with { $0.callID = 3 }
        var request = Mentory_V1_Envelope()
        request.request = Mentory_V1_Request.with { $0.id = 1 }
        core.receive(Self.frame(event, pluginCall, request))
        guard case .event(let delivered) = core.nextInbound(),
            case .pluginCall(let forwarded) = core.nextInbound(),
            case .ignored = core.nextInbound()
        else {
            Issue.record("expected the event, the plugin call, then an ignored request")
            return
        }
        #expect(delivered == event.event)
        #expect(forwarded == pluginCall.pluginCall)
        #expect(core.nextInbound().isNone)
    }

    @Test("a connection error that closes ends the connection with its code; one that does not is a notice")
    func connectionErrors() throws {
        var core = Self.core()
        _ = try Self.call(&core, "first")
        _ = try Self.call(&core, "second")
        core.receive(
            Self.frame(
                Self.connectionError(.malformedMessage, closing: false),
                Self.connectionError(.tooManyConnections, closing: true)))
        guard case .connectionNotice(let notice) = core.nextInbound() else {
            Issue.record("expected a notice")
            return
        }
        #expect(notice.remoteCode == .malformedMessage)
        guard case .closed(let ending) = core.nextInbound() else {
            Issue.record("expected the connection to end")
            return
        }
        let refused = MentoryClientError.remote(
            code: UInt32(Mentory_V1_ErrorCode.tooManyConnections.rawValue), message: "refused")
        #expect(ending.reason == refused)
        #expect(Set(ending.pendingCalls) == ["first", "second"])
        #expect(throws: refused) { try Self.call(&core, "later") }
        // The first reason stays.
        #expect(core.close(.cancelled).reason == refused)
    }

    @Test("a frame that is not an envelope is a malformed reply and ends the connection")
    func malformedFrame() {
        var core = Self.core()
        var bytes = ByteBuffer()
        bytes.writeInteger(UInt32(3))
        bytes.writeBytes([0xFF, 0xFF, 0xFF])
        core.receive(bytes)
        guard case .closed(let ending) = core.nextInbound(), case .malformedReply = ending.reason else {
            Issue.record("expected a malformed reply")
            return
        }
    }

    @Test("the end of input mid-frame is a truncated frame; at a frame boundary the daemon closed the connection")
    func inputEnded() throws {
        var core = Self.core()
        _ = try Self.call(&core, "waiting")
        var partial = ByteBuffer()
        partial.writeInteger(UInt32(100))
        partial.writeBytes([UInt8](repeating: 7, count: 10))
        core.receive(partial)
        #expect(core.nextInbound().isNone)
        let truncated = core.inputEnded()
        #expect(
            truncated.reason == .connectionClosed(reason: FrameError.truncatedFrame(bufferedBytes: 14).description))
        #expect(truncated.pendingCalls == ["waiting"])

        var clean = Self.core()
        #expect(clean.inputEnded().reason == .connectionClosed(reason: "the daemon closed the connection"))
    }
}

extension Optional {
    /// Whether there is no value, for values that are not `Equatable` (no outcome is ready).
    fileprivate var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}
