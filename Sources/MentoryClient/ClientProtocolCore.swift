#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire
import NIOCore

/// The client's side of one connection's protocol, as a value: bytes read and calls in, envelopes to send and
/// outcomes out. It does no I/O, reads no clock and starts nothing.
///
/// Both clients drive one: ``BlockingMentoryConnection`` from its blocking socket loop, ``ClientChannelHandler``
/// from its channel's events. The core builds the `Hello` and checks the `Welcome`, numbers and encodes the
/// requests, splits the bytes read into frames (a frame longer than ``maxFrameLength`` is refused from its length
/// prefix), decodes each and says what it means (``Inbound``): the answer to which pending call, an event, a call
/// forwarded to a plugin, a connection error that does not close, or the end of the connection and why. The driver
/// reads, writes, waits and keeps the time; it tells the core when a call timed out (``abandonCall(_:)``), when the
/// input ended (``inputEnded()``) and when the connection failed (``close(_:)``).
///
/// `PendingCall` is what the driver keeps for each call until it is answered (the NIO client: its promise and
/// timer; the blocking client: nothing); the core hands it back with the answer, or when the connection ends.
///
/// The lifecycle is one ``State``: ``State/idle`` → ``State/awaitingWelcome`` (the `Hello` is sent; calls may
/// follow it before the `Welcome` arrives) → ``State/open(_:)`` → ``State/closed(_:)``. The first reason the
/// connection ended is kept: every later call fails with it.
struct ClientProtocolCore<PendingCall> {
    /// Where the connection is in its life.
    enum State {
        /// Nothing sent yet.
        case idle
        /// The `Hello` is sent; the `Welcome` has not arrived.
        case awaitingWelcome
        /// Handshaken.
        case open(Mentory_V1_Welcome)
        /// Ended, for this reason.
        case closed(MentoryClientError)
    }

    /// How the connection ended: the reason, and the calls that were still waiting (to fail with it).
    struct Ending {
        /// Why the connection ended; every call still waiting and every later call fails with it.
        var reason: MentoryClientError
        /// The calls that were waiting for an answer, in no particular order.
        var pendingCalls: [PendingCall]
    }

    /// What one frame from the daemon means.
    enum Inbound {
        /// The handshake completed.
        case welcomed(Mentory_V1_Welcome)
        /// The answer to the pending call `id`: its reply body, or the daemon's error as
        /// ``MentoryClientError/remote(code:message:reason:)``. The call is no longer pending.
        case answered(id: UInt64, call: PendingCall, result: Result<Data, MentoryClientError>)
        /// A response no call waits for: the late answer to a call that timed out or was abandoned, to a request
        /// sent without waiting, or to an id never sent. The connection stays usable; skip it.
        case unmatchedResponse(id: UInt64)
        /// An event of one of the connection's subscriptions.
        case event(Mentory_V1_Event)
        /// A call the daemon forwards to this connection, registered as a plugin.
        case pluginCall(Mentory_V1_PluginCall)
        /// A connection error that does not close the connection (e.g. a malformed message of ours); skip it.
        case connectionNotice(MentoryClientError)
        /// The connection is over: close it, and fail the handshake and the calls still waiting with the
        /// reason. A connection error that closes, a frame that is too long or not an envelope, or a
        /// `Welcome` of another protocol version.
        case closed(Ending)
        /// A message the daemon never sends a client (`Hello`, `Request`, `PluginReply`), or a second
        /// `Welcome`; skip it.
        case ignored
    }

    /// Where the connection is in its life.
    private(set) var state: State = .idle
    /// The name the `Hello` gives, for the daemon's logs.
    let clientName: String
    /// Splits the bytes read into frames, as the daemon does.
    private let decoder: LengthPrefixedFrameDecoder
    /// Bytes read and not yet returned as frames: at most one frame plus what one read added.
    private var inbound = ByteBuffer()
    /// The id of the last request; clients number their requests from 1.
    private var lastRequestID: UInt64 = 0
    /// The calls waiting for their answer, by request id.
    private var pendingCalls: [UInt64: PendingCall] = [:]

    /// A core for a connection that says it is `clientName` and accepts frames of at most `maxFrameLength` bytes.
    init(clientName: String, maxFrameLength: Int) {
        self.clientName = clientName
        self.decoder = LengthPrefixedFrameDecoder(maxFrameLength: maxFrameLength)
    }

    /// The largest frame accepted, in bytes.
    var maxFrameLength: Int { self.decoder.maxFrameLength }

    /// The daemon's `Welcome`, once it has arrived (and until the connection ends).
    var welcome: Mentory_V1_Welcome? {
        guard case .open(let welcome) = self.state else { return nil }
        return welcome
    }

    /// Why the connection ended, once it has.
    var closeReason: MentoryClientError? {
        guard case .closed(let reason) = self.state else { return nil }
        return reason
    }

    /// How many bytes were read and not yet taken as frames.
    var bufferedBytes: Int { self.inbound.readableBytes }

    /// How many calls wait for their answer.
    var pendingCallCount: Int { self.pendingCalls.count }

    // MARK: Outbound

    /// The `Hello` that opens the connection; it is to be sent once, first.
    mutating func hello() -> Mentory_V1_Envelope {
        guard case .idle = self.state else {
            preconditionFailure("the Hello is sent once, first (state: \(self.state))")
        }
        self.state = .awaitingWelcome
        var envelope = Mentory_V1_Envelope()
        envelope.hello = Mentory_V1_Hello.with {
            $0.protocolVersion = WireProtocol.version
            $0.clientName = self.clientName
        }
        return envelope
    }

    /// Numbers a request for `namespace.method` and returns it with its id, to send; `pendingCall(id)` is kept
    /// until the answer, the call is abandoned or the connection ends (`nil` sends without waiting for an answer).
    ///
    /// With a `timeout`, the daemon is told when the answer stops being useful, in whole milliseconds and at
    /// least 1: it fails the call with DEADLINE_EXCEEDED then (a plugin call, a handler that checks its deadline)
    /// rather than working for a caller that has gone. Throws the reason the connection ended, if it has.
    mutating func startCall(
        namespace: String,
        method: String,
        body: Data,
        timeout: Duration?,
        pendingCall: (_ id: UInt64) -> PendingCall?
    ) throws(MentoryClientError) -> (id: UInt64, envelope: Mentory_V1_Envelope) {
        if let closeReason = self.closeReason { throw closeReason }
        self.lastRequestID += 1
        let id = self.lastRequestID
        var request = Mentory_V1_Request()
        request.id = id
        request.namespace = namespace
        request.method = method
        request.body = body
        if let timeout {
            request.timeoutMs = UInt32(clamping: max(1, Self.nanoseconds(timeout) / 1_000_000))
        }
        if let call = pendingCall(id) {
            self.pendingCalls[id] = call
        }
        var envelope = Mentory_V1_Envelope()
        envelope.request = request
        return (id, envelope)
    }

    /// Stops waiting for the answer to call `id` (it timed out, or its caller left) and returns what was kept for
    /// it; its answer, if it comes, is then an ``Inbound/unmatchedResponse(id:)``. `nil` if it is not waiting.
    mutating func abandonCall(_ id: UInt64) -> PendingCall? {
        self.pendingCalls.removeValue(forKey: id)
    }

    // MARK: Inbound

    /// Adds bytes read from the connection; ``nextInbound()`` then takes the frames they complete.
    /// Bytes read after the connection ended are dropped.
    mutating func receive(_ bytes: ByteBuffer) {
        guard self.closeReason == nil else { return }
        if self.inbound.readableBytes == 0 {
            self.inbound = bytes
        } else {
            // What earlier frames took is dropped first: the buffer holds at most one frame plus one read.
            self.inbound.discardReadBytes()
            self.inbound.writeImmutableBuffer(bytes)
        }
    }

    /// What the next whole frame received means, or `nil` until more bytes arrive (and once the connection ended).
    mutating func nextInbound() -> Inbound? {
        guard self.closeReason == nil else { return nil }
        let frame: ByteBuffer?
        do {
            frame = try self.decoder.nextFrame(from: &self.inbound)
        } catch {
            // The stream can no longer be split into frames.
            return .closed(self.close(.connectionClosed(reason: error.description)))
        }
        guard let frame else { return nil }
        let envelope: Mentory_V1_Envelope
        do {
            envelope = try Mentory_V1_Envelope(frame: frame)
        } catch {
            return .closed(self.close(.malformedReply(error.reason)))
        }
        switch envelope.kind {
        case .welcome(let welcome):
            guard case .awaitingWelcome = self.state else { return .ignored }
            guard welcome.protocolVersion == WireProtocol.version else {
                return .closed(
                    self.close(
                        .malformedReply(
                            "the daemon speaks protocol version \(welcome.protocolVersion), "
                                + "this client version \(WireProtocol.version)")))
            }
            self.state = .open(welcome)
            return .welcomed(welcome)
        case .response(let response):
            guard let call = self.pendingCalls.removeValue(forKey: response.id) else {
                return .unmatchedResponse(id: response.id)
            }
            let result: Result<Data, MentoryClientError> =
                switch response.result {
                case .body(let body): .success(body)
                case .error(let error): .failure(MentoryClientError(error))
                case nil: .success(Data())
                }
            return .answered(id: response.id, call: call, result: result)
        case .event(let event):
            return .event(event)
        case .pluginCall(let call):
            return .pluginCall(call)
        case .connectionError(let connectionError):
            let error = MentoryClientError(connectionError.error)
            return connectionError.closing ? .closed(self.close(error)) : .connectionNotice(error)
        case .hello, .request, .pluginReply, nil:
            return .ignored
        }
    }

    /// The daemon's side of the stream ended (or the connection closed): a frame cut short is a truncated frame,
    /// otherwise the daemon closed the connection, unless the connection had already ended for another reason.
    mutating func inputEnded() -> Ending {
        guard self.closeReason == nil, self.inbound.readableBytes > 0 else {
            return self.close(.connectionClosed(reason: "the daemon closed the connection"))
        }
        let truncated = FrameError.truncatedFrame(bufferedBytes: self.inbound.readableBytes)
        return self.close(.connectionClosed(reason: truncated.description))
    }

    /// Ends the connection for `reason`, unless it has ended already (then the first reason stays); returns
    /// the reason in force and the calls that were waiting.
    mutating func close(_ reason: MentoryClientError) -> Ending {
        if let closeReason = self.closeReason {
            return Ending(reason: closeReason, pendingCalls: [])
        }
        self.state = .closed(reason)
        self.inbound = ByteBuffer()
        let pending = Array(self.pendingCalls.values)
        self.pendingCalls = [:]
        return Ending(reason: reason, pendingCalls: pending)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }
}

extension MentoryClientError {
    /// The failure of a call (or a handshake) that waited `limit` for its answer in vain.
    static func timedOut(after limit: Duration) -> MentoryClientError {
        .timedOut(seconds: Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
    }
}
