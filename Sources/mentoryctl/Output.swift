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

    /// An event as one JSON line: topic, sequence, kind, epoch and the decoded body.
    static func eventJSON(_ event: Mentory_V1_Event) -> String {
        let kind =
            switch event.kind {
            case .snapshot: "snapshot"
            case .reset: "reset"
            default: "change"
            }
        let body: String
        switch (event.topic, event.kind) {
        case (WireNames.mentor, _):
            body = self.json((try? Mentory_V1_MentorState(serializedBytes: event.body)) ?? .init())
        case (WireNames.reachability, .change):
            body = self.json((try? Mentory_V1_PeerState(serializedBytes: event.body)) ?? .init())
        case (WireNames.reachability, _):
            body = self.json((try? Mentory_V1_ReachabilitySnapshot(serializedBytes: event.body)) ?? .init())
        case (WireNames.diary, .change):
            body = self.json((try? Mentory_V1_DiaryChange(serializedBytes: event.body)) ?? .init())
        case (WireNames.diary, _):
            body = self.json((try? Mentory_V1_DiarySnapshot(serializedBytes: event.body)) ?? .init())
        default:
            body = "\"\(event.body.base64EncodedString())\""
        }
        let topic = self.json(Google_Protobuf_StringValue(event.topic))
        return
            #"{"topic":\#(topic),"sequence":\#(event.sequence),"kind":"\#(kind)","epoch":\#(event.epoch),"body":\#(body)}"#
    }

    static func printJSON(_ message: some SwiftProtobuf.Message) {
        print(self.json(message))
    }

    /// Writes one line to standard output at once, bypassing stdio's buffer.
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data("mentoryctl: \(text)\n".utf8))
    }
}

extension ClientOptions {
    /// Connects, runs `body`, closes, and turns failures into a message on stderr and an exit status.
    func withClient(_ body: (MentoryClient) async throws -> Void) async throws {
        let client: MentoryClient
        do {
            client = try await self.connect()
        } catch {
            throw Self.fail(error)
        }
        do {
            try await body(client)
            await client.close()
        } catch {
            await client.close()
            throw Self.fail(error)
        }
    }

    private static func fail(_ error: any Error) -> any Error {
        switch error {
        case let error as MentoryClientError:
            Output.error(error.description)
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
