import Foundation
import Glibc
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import NIOCore
import NIOPosix
import Testing

/// How a ``ScriptedPeer`` answers a request, once it has welcomed the client.
enum PeerScript: Sendable {
    /// An event, an answer to another id, then the answer (echoing the request's body).
    case answers
    /// Never answers the hello.
    case silentHandshake
    /// Welcomes, then never answers the request.
    case silentAfterWelcome
    /// Sends part of a frame (a 100-byte length, 10 bytes) and closes.
    case closesMidFrame
    /// Announces a frame of `length` bytes.
    case oversizedFrame(length: UInt32)
    /// Sends a closing connection error with `code`, then closes.
    case connectionError(code: Mentory_V1_ErrorCode)
    /// Sends a frame whose bytes are not an envelope.
    case malformedFrame
}

/// A fake daemon on a real Unix socket that follows one script; its I/O runs on NIO's threads.
final class ScriptedPeer: Sendable {
    let socketPath: String
    let directory: String
    private let channel: any Channel

    init(_ script: PeerScript) async throws {
        let directory = "\(TestTemporaryDirectory.path)/mentoryd-blocking-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        self.directory = directory
        self.socketPath = directory + "/fake.sock"
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(LengthPrefixedFrameDecoder()),
                        ScriptedPeerHandler(script: script),
                    ])
                }
            }
            .bind(unixDomainSocketPath: self.socketPath)
            .get()
    }

    func stop() async {
        try? await self.channel.close()
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}

final class ScriptedPeerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let script: PeerScript

    init(script: PeerScript) {
        self.script = script
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let envelope = try? Mentory_V1_Envelope(frame: Self.unwrapInboundIn(data)) else { return }
        var out = context.channel.allocator.buffer(capacity: 256)
        switch envelope.kind {
        case .hello:
            if case .silentHandshake = self.script { return }
            var reply = Mentory_V1_Envelope()
            reply.welcome = Mentory_V1_Welcome.with {
                $0.protocolVersion = WireProtocol.version
                $0.serverVersion = "scripted"
            }
            out.writeFrame(reply)
        case .request(let request):
            switch self.script {
            case .answers:
                var event = Mentory_V1_Envelope()
                event.event = Mentory_V1_Event.with { $0.topic = "diary" }
                out.writeFrame(event)
                var other = Mentory_V1_Envelope()
                other.response = .success(id: request.id + 1000, body: Data("not this one".utf8))
                out.writeFrame(other)
                var answer = Mentory_V1_Envelope()
                answer.response = .success(id: request.id, body: request.body)
                out.writeFrame(answer)
            case .silentHandshake, .silentAfterWelcome:
                return
            case .closesMidFrame:
                out.writeInteger(UInt32(100))
                out.writeBytes([UInt8](repeating: 7, count: 10))
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(Self.wrapOutboundOut(out)).whenComplete { _ in bound.value.close(promise: nil) }
                return
            case .oversizedFrame(let length):
                out.writeInteger(length)
                out.writeBytes([UInt8](repeating: 0, count: 16))
            case .connectionError(let code):
                var error = Mentory_V1_Envelope()
                error.connectionError = Mentory_V1_ConnectionError.with {
                    $0.closing = true
                    $0.error = Mentory_V1_Error(code: code, message: "scripted refusal")
                }
                out.writeFrame(error)
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(Self.wrapOutboundOut(out)).whenComplete { _ in bound.value.close(promise: nil) }
                return
            case .malformedFrame:
                out.writeInteger(UInt32(3))
                out.writeBytes([0xFF, 0xFF, 0xFF])
            }
        default:
            return
        }
        context.writeAndFlush(Self.wrapOutboundOut(out), promise: nil)
    }
}

/// Connects a blocking client to `path`, makes one `session.ping`-shaped call with `body`, and reports how it went.
func blockingCall(
    _ path: String, body: Data = Data(), timeout: Duration = .seconds(30), maxFrameLength: Int = 1024,
    pipelined: Bool = false
) async -> Result<Data, MentoryClientError> {
    await onOwnThread {
        do throws(MentoryClientError) {
            let connection =
                pipelined
                ? try BlockingMentoryConnection.connectPipelined(
                    socketPath: path, clientName: "blocking-tests", defaultTimeout: timeout,
                    maxFrameLength: maxFrameLength)
                : try BlockingMentoryConnection.connect(
                    socketPath: path, clientName: "blocking-tests", defaultTimeout: timeout,
                    maxFrameLength: maxFrameLength)
            defer { connection.close() }
            let reply = try connection.call(WireNames.session, "ping", body: body)
            // The welcome has been read by now, whichever way the connection was made.
            guard connection.welcome.serverVersion == "scripted" else {
                return .failure(.malformedReply("no welcome: \(connection.welcome)"))
            }
            return .success(reply)
        } catch {
            return .failure(error)
        }
    }
}

@Suite("The blocking client against scripted peers", .timeLimit(.minutes(5)))
struct BlockingConnectionPeerTests {
    @Test("skips events and answers to other ids and returns its own answer", arguments: [false, true])
    func answers(pipelined: Bool) async throws {
        let peer = try await ScriptedPeer(.answers)
        let result = await blockingCall(peer.socketPath, body: Data("echo".utf8), pipelined: pipelined)
        await peer.stop()
        #expect(result == .success(Data("echo".utf8)))
    }

    @Test("a handshake that is never answered times out", arguments: [false, true])
    func silentHandshake(pipelined: Bool) async throws {
        let peer = try await ScriptedPeer(.silentHandshake)
        let result = await blockingCall(peer.socketPath, timeout: .milliseconds(300), pipelined: pipelined)
        await peer.stop()
        #expect(result == .failure(.timedOut(seconds: 0.3)))
    }

    @Test("a call that is never answered times out, and the connection stays usable")
    func silentCall() async throws {
        let peer = try await ScriptedPeer(.silentAfterWelcome)
        let socketPath = peer.socketPath
        let (first, second, connected) = await onOwnThread { () -> (MentoryClientError?, MentoryClientError?, Bool) in
            do throws(MentoryClientError) {
                // The handshake gets the default 30 s: the peer answers it, but under ThreadSanitizer with both
                // cores busy that can take longer than the calls' short limit.
                let connection = try BlockingMentoryConnection.connect(
                    socketPath: socketPath, clientName: "blocking-tests")
                var errors: [MentoryClientError] = []
                for _ in 0..<2 {
                    do throws(MentoryClientError) {
                        _ = try connection.call(WireNames.session, "ping", body: Data(), timeout: .milliseconds(200))
                    } catch {
                        errors.append(error)
                    }
                }
                return (errors.first, errors.dropFirst().first, connection.isConnected)
            } catch {
                return (error, nil, false)
            }
        }
        await peer.stop()
        #expect(first == .timedOut(seconds: 0.2))
        #expect(second == .timedOut(seconds: 0.2))
        #expect(connected)
    }

    @Test("a peer that closes in the middle of a frame fails the call with connectionClosed")
    func closesMidFrame() async throws {
        let peer = try await ScriptedPeer(.closesMidFrame)
        let result = await blockingCall(peer.socketPath)
        await peer.stop()
        guard case .failure(.connectionClosed(let reason)) = result else {
            Issue.record("expected connectionClosed, got \(result)")
            return
        }
        #expect(reason == FrameError.truncatedFrame(bufferedBytes: 14).description)
    }

    @Test("a frame longer than the limit is refused from its length prefix")
    func oversizedFrame() async throws {
        let peer = try await ScriptedPeer(.oversizedFrame(length: 1025))
        let result = await blockingCall(peer.socketPath, maxFrameLength: 1024)
        await peer.stop()
        #expect(
            result
                == .failure(
                    .connectionClosed(reason: FrameError.frameTooLarge(length: 1025, maximum: 1024).description)))
    }

    @Test("a closing connection error fails the call with its code", arguments: [false, true])
    func connectionError(pipelined: Bool) async throws {
        let peer = try await ScriptedPeer(.connectionError(code: .tooManyConnections))
        let result = await blockingCall(peer.socketPath, pipelined: pipelined)
        await peer.stop()
        #expect(
            result
                == .failure(
                    .remote(code: UInt32(Mentory_V1_ErrorCode.tooManyConnections.rawValue), message: "scripted refusal")
                ))
    }

    @Test("a frame that is not an envelope is a malformed reply")
    func malformedFrame() async throws {
        let peer = try await ScriptedPeer(.malformedFrame)
        let result = await blockingCall(peer.socketPath)
        await peer.stop()
        guard case .failure(.malformedReply) = result else {
            Issue.record("expected malformedReply, got \(result)")
            return
        }
    }

    @Test("nothing listening is cannotConnect; a socket in an untrusted directory is refused before connecting")
    func cannotConnectAndUntrusted() async throws {
        let peer = try await ScriptedPeer(.answers)
        let missing = await blockingCall(peer.directory + "/missing.sock")
        guard case .failure(.cannotConnect(let path, _)) = missing else {
            Issue.record("expected cannotConnect, got \(missing)")
            await peer.stop()
            return
        }
        #expect(path == peer.directory + "/missing.sock")
        let socketPath = peer.socketPath
        let untrusted = await onOwnThread { () -> MentoryClientError? in
            do throws(MentoryClientError) {
                // Only a uid that owns nothing here is trusted: the directory (ours) fails the check.
                _ = try BlockingMentoryConnection.connect(
                    socketPath: socketPath, clientName: "blocking-tests", trust: SocketTrust(trustedUIDs: [4_000_000]))
                return nil
            } catch {
                return error
            }
        }
        await peer.stop()
        guard case .untrustedSocket(let path, _) = untrusted else {
            Issue.record("expected untrustedSocket, got \(String(describing: untrusted))")
            return
        }
        #expect(path == socketPath)
    }
}

@Suite("The blocking client against the real daemon", .serialized, .timeLimit(.minutes(10)))
struct BlockingConnectionDaemonTests {
    @Test("typed calls, a daemon error, and the same answers as the NIO client", arguments: [false, true])
    func typedCalls(pipelined: Bool) async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let path = daemon.socketPath
        let outcome = await onOwnThread { () -> Result<[String], MentoryClientError> in
            do throws(MentoryClientError) {
                let connection =
                    pipelined
                    ? try BlockingMentoryConnection.connectPipelined(
                        socketPath: path, clientName: "blocking-tests", defaultTimeout: .seconds(60))
                    : try BlockingMentoryConnection.connect(
                        socketPath: path, clientName: "blocking-tests", defaultTimeout: .seconds(60))
                defer { connection.close() }
                try connection.ping()
                var add = Mentory_V1_DiaryAddRequest()
                add.recordDate = "2026-11-20"
                add.title = "blocking"
                add.text = "written without an event loop"
                add.emotion = .pleasant
                let added = try connection.diaryAdd(add)
                let fetched = try connection.diaryGet(id: added.id)
                let listed = try connection.diaryList(limit: 10)
                var missing = "none"
                do throws(MentoryClientError) {
                    _ = try connection.diaryGet(id: EntityID.random())
                } catch {
                    missing = "\(error.remoteCode.map { "\($0)" } ?? "\(error)")"
                }
                let status = try connection.status()
                return .success([
                    connection.welcome.serverVersion, fetched.title, "\(listed.map(\.id) == [added.id])", missing,
                    "\(status.connections >= 1)",
                ])
            } catch {
                return .failure(error)
            }
        }
        let viaNIO = try await daemon.client()
        let version = viaNIO.welcome.serverVersion
        await viaNIO.close()
        await daemon.stop()
        #expect(outcome == .success([version, "blocking", "true", "\(Mentory_V1_ErrorCode.notFound)", "true"]))
    }
}
