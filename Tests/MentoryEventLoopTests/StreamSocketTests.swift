import Foundation
import Glibc
import MentoryEventLoop
import MentoryTestSupport
import NIOCore
import Testing

@Suite(.timeLimit(.minutes(1)))
struct StreamSocketTests {
    @Test func readsWhatThePeerWroteThenWouldBlockThenEndOfInput() throws {
        let pair = try SocketPair()
        var input = ByteBuffer()
        #expect(StreamSocket.read(pair.ours, into: &input, maximumBytes: 16) == .wouldBlock)
        pair.send(Array(0..<40))
        #expect(StreamSocket.read(pair.ours, into: &input, maximumBytes: 16) == .read(16))
        #expect(StreamSocket.read(pair.ours, into: &input, maximumBytes: 1024) == .read(24))
        #expect(input.readBytes(length: input.readableBytes) == Array(0..<40))
        shutdown(pair.theirs, Int32(SHUT_WR))
        #expect(StreamSocket.read(pair.ours, into: &input, maximumBytes: 16) == .endOfInput)
    }

    @Test func aFullSocketTakesPartOfAWriteAndTheRestLater() throws {
        let pair = try SocketPair()
        let sent = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var output = ByteBuffer(bytes: sent)
        var taken = 0
        // The send buffer fills long before 1 MiB: the kernel takes part, then nothing.
        while case .wrote(let count) = StreamSocket.write(pair.ours, from: &output) {
            #expect(count > 0)
            taken += count
        }
        #expect(StreamSocket.write(pair.ours, from: &output) == .wouldBlock)
        #expect(taken > 0 && taken < sent.count)
        #expect(output.readableBytes == sent.count - taken)
        // What the peer reads is what was consumed, in order; once it has read, the rest goes.
        var received = ByteBuffer()
        while received.readableBytes < sent.count {
            if case .failed(let error) = StreamSocket.read(pair.theirs, into: &received, maximumBytes: 1 << 16) {
                Issue.record("read failed: \(error)")
                return
            }
            if output.readableBytes > 0, case .failed(let error) = StreamSocket.write(pair.ours, from: &output) {
                Issue.record("write failed: \(error)")
                return
            }
        }
        #expect(received.readBytes(length: received.readableBytes) == sent)
    }

    @Test func writingToAPeerThatHasGoneIsAnErrorNotASignal() throws {
        let pair = try SocketPair()
        shutdown(pair.theirs, Int32(SHUT_RDWR))  // Gone, as far as a writer can tell.
        var output = ByteBuffer(bytes: [1, 2, 3])
        #expect(StreamSocket.write(pair.ours, from: &output) == .failed(EpollError("send", errno: EPIPE)))
        #expect(output.readableBytes == 3)
    }

    @Test func listensAcceptsAndRefusesATakenPath() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/s.sock"
        let listener = try StreamSocket.listen(unixPath: path, backlog: 8)
        defer { close(listener) }
        #expect(try StreamSocket.accept(listener) == nil)
        let client = try connectedClient(to: path)
        defer { close(client) }
        let accepted = try #require(try StreamSocket.accept(listener))
        defer { close(accepted) }
        #expect(fcntl(accepted, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(accepted, F_GETFD) & FD_CLOEXEC != 0)
        #expect(throws: EpollError("bind", errno: EADDRINUSE)) { try StreamSocket.listen(unixPath: path, backlog: 8) }
        let tooLong = directory.path + "/" + String(repeating: "x", count: 120)
        #expect(throws: EpollError("bind", errno: ENAMETOOLONG)) {
            try StreamSocket.listen(unixPath: tooLong, backlog: 8)
        }
    }

    /// A blocking client socket connected to `path`.
    private func connectedClient(to path: String) throws -> Int32 {
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(client)
            throw EpollError("connect", errno: errno)
        }
        return client
    }
}

/// A directory of its own under the tests' temporary directory, removed with what is in it when it goes.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("\(TestTemporaryDirectory.path)/mentory-loop-tests.XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw EpollError("mkdtemp", errno: errno) }
        self.path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}
