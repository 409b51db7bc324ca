import ArgumentParser
import Foundation
import MentoryClient
import MentoryWire
import SwiftProtobuf

/// Writing results and failures the way scripts and people expect.
enum Output {
    static let jsonOptions: JSONEncodingOptions = {
        var options = JSONEncodingOptions()
        options.alwaysPrintInt64sAsNumbers = true
        return options
    }()

    /// One message as a single line of proto3 JSON.
    static func json(_ message: some SwiftProtobuf.Message) -> String {
        (try? message.jsonString(options: self.jsonOptions)) ?? "{}"
    }

    static func printJSON(_ message: some SwiftProtobuf.Message) {
        print(self.json(message))
    }

    /// Writes one line to standard output at once, bypassing stdio's buffer.
    /// A daemon error as `--json` prints it on standard output: `{"error": {"code": …, "message": …, "reason": …}}`.
    static func errorJSON(_ error: Mentory_V1_Error) -> String {
        "{\"error\": \(self.json(error))}"
    }

    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data("mentoryctl: \(text)\n".utf8))
    }
}

extension ClientSettings {
    /// Connects, runs `body`, closes, and turns failures into a message on stderr and an exit status.
    func withClient(_ body: (MentoryClient) async throws -> Void) async throws {
        let client: MentoryClient
        do {
            client = try await self.connect()
        } catch {
            throw ClientOptions.fail(error, json: self.json)
        }
        do {
            try await body(client)
            await client.close()
        } catch {
            await client.close()
            throw ClientOptions.fail(error, json: self.json)
        }
    }

    /// Connects without an event loop, runs `body`, closes, and turns failures into a message on stderr and
    /// an exit status, exactly as ``withClient(_:)`` does; for commands that make a few calls and exit.
    func withConnection(pipelined: Bool = true, _ body: (BlockingMentoryConnection) throws -> Void) throws {
        let connection: BlockingMentoryConnection
        do {
            connection = try self.connectBlocking(pipelined: pipelined)
        } catch {
            throw ClientOptions.fail(error, json: self.json)
        }
        defer { connection.close() }
        do {
            try body(connection)
        } catch {
            throw ClientOptions.fail(error, json: self.json)
        }
    }
}

extension ClientOptions {

    /// Prints `error` and returns the exit status to throw for it; with `json`, a daemon error also
    /// goes to standard output as ``Output/errorJSON(_:)``, its `reason` included.
    static func fail(_ error: any Error, json: Bool = false) -> any Error {
        switch error {
        case let error as MentoryClientError:
            Output.error(error.description)
            if json, let wire = error.remoteError { Output.line(Output.errorJSON(wire)) }
            switch error {
            case .cannotConnect, .untrustedSocket: return ExitCode(69)
            case .connectionClosed, .timedOut: return ExitCode(69)
            // A daemon that could not start is as unavailable as one that is not running.
            case .remote where error.remoteCode == .startupFailed: return ExitCode(69)
            case .remote, .malformedReply, .cancelled, .eventBufferOverflow: return ExitCode.failure
            }
        case let error as ValidationError:
            return error
        case let error as ExitCode:
            return error
        default:
            Output.error("\(error)")
            return ExitCode.failure
        }
    }
}

extension MentoryClientError {
    /// Whether the daemon could not be reached (not running, gone, or silent), as opposed to refusing something.
    var isUnreachable: Bool {
        switch self {
        case .cannotConnect, .connectionClosed, .timedOut: true
        default: false
        }
    }
}
