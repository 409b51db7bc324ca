// How a `dispatch` input turns into operations, and the harness's view of the connections.
//
// Layout (Fuzz/make-corpus.py writes seeds in it):
//
//   byte 0        ring capacity selector (low 3 bits)
//   then a sequence of operations, each starting with one byte `op`:
//     op >> 6     the connection (0...3) it acts on
//     op & 0x3F   what it does (requests, i.e. all but 32...38, have a one-byte request id next):
//       0 ..< 32  a raw request to `methodTable[k]`, then `len` (1 byte) and `len` body bytes
//       32        Hello: attach the connection
//       33        the connection closes: detach it
//       34        the subscriber's queue fills (the sink refuses events)
//       35        the subscriber's queue drains (the sink accepts again, `sinkDrained`)
//       36        barrier: wait for every operation started so far
//       37        shutdown: close the handlers
//       38        a frame: `len` (2 bytes, big-endian) then that many bytes decoded with
//                 `Envelope(frame:)` and handled as the server would (Hello or Request)
//       39        session.subscribe   built from 2 bytes (topics, resume)
//       40        session.unsubscribe built from 1 byte (topics)
//       41        mentor.set          built from 2 bytes
//       42        mentor.completeTodo built from 1 byte
//       43        reachability.report built from 1 byte
//       44        diary.add           built from 3 bytes
//       45        diary.get/delete/setSuggestionDone on a known or unknown entry, 3 bytes
//       46        diary.list          built from 2 bytes
//       other     a request to `methodTable[op & 0x1F]` with an empty body
//
// Structured operations build valid-looking messages from a few bytes (and from ids earlier
// replies handed out), so the fuzzer reaches deep states without having to invent nested
// protobuf; raw requests and frames cover everything else.

import MentoryDomain
import MentoryEngine
import MentoryWire
import NIOCore
import SwiftProtobuf

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Reads an input from the front; past the end every read yields zero.
struct ByteReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { self.index >= self.bytes.count }

    mutating func byte() -> UInt8 {
        guard self.index < self.bytes.count else { return 0 }
        defer { self.index += 1 }
        return self.bytes[self.index]
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        let end = min(self.bytes.count, self.index + count)
        defer { self.index = end }
        return Array(self.bytes[self.index..<end])
    }
}

/// The namespaces whose handlers the harness registers (`session` is built into the engine).
let registeredNamespaces = [
    MentorySchema.Session.info, MentorySchema.Mentor.info, MentorySchema.Reachability.info, MentorySchema.Diary.info,
]

/// Every method of the registered namespaces, as the schema (mentory.proto's services) declares them.
let schemaMethods: [(namespace: String, method: String)] = registeredNamespaces.flatMap { namespace in
    namespace.methods.map { (namespace.name, $0.name) }
}

/// Near misses the daemon must refuse. Fuzz/make-corpus.py counts on there being 12 of them.
let unknownMethods: [(namespace: String, method: String)] = [
    ("session", "Ping"), ("session", ""), ("mentor", "nope"), ("diary", "add "),
    ("", ""), ("nope", "ping"), ("Diary", "add"), ("storage", "backup"), ("debug", "crash"),
    ("reachability", "set"), ("mentor", "completetodo"), ("session", "subscribe\u{0}"),
]

/// What raw requests 0..<32 call: the schema's methods in declaration order, then the near misses, then
/// the schema's methods again from the start until 32 (Fuzz/make-corpus.py builds the same table).
let methodTable: [(namespace: String, method: String)] = {
    var table = schemaMethods + unknownMethods
    var index = 0
    while table.count < 32 {
        table.append(schemaMethods[index % schemaMethods.count])
        index += 1
    }
    return Array(table.prefix(32))
}()

/// The methods each namespace answers, as the schema declares them.
let knownMethods: [String: Set<String>] = Dictionary(
    uniqueKeysWithValues: registeredNamespaces.map { ($0.name, Set($0.methods.map(\.name))) }
)

/// The topics of the registered namespaces, in declaration order (bit `i` of a topic mask is topic `i`).
let topicNames = registeredNamespaces.flatMap { $0.topics.map(\.name) }

/// One request to send.
struct Call: Sendable {
    var id: UInt64
    var namespace: String
    var method: String
    var body: Data
    /// Topics this request asks to resume, with the positions; the sink must accept a replay from there.
    var resumes: [Resume] = []
    /// Set for structured operations: the model turns it into namespace, method and body when it runs.
    var built: Built? = nil

    var namespaceExists: Bool { knownMethods[self.namespace] != nil }
    var methodExists: Bool { knownMethods[self.namespace]?.contains(self.method) ?? false }
}

/// A structured request, completed with ids from the model when it runs.
enum Built: Sendable {
    case subscribe(topics: UInt8, resume: UInt8)
    case unsubscribe(topics: UInt8)
    case mentorSet(UInt8, UInt8)
    case mentorComplete(UInt8)
    case report(UInt8)
    case diaryAdd(UInt8, UInt8, UInt8)
    case diaryRef(UInt8, UInt8, UInt8)
    case diaryList(UInt8, UInt8)
}

enum Operation: Sendable {
    case attach(connection: Int)
    case detach(connection: Int)
    case setAccepting(connection: Int, Bool)
    case drained(connection: Int)
    case barrier
    case shutdown
    case request(connection: Int, Call)

    var isRequest: Bool {
        if case .request = self { return true }
        return false
    }

    /// The next operation, or `nil` at the end of the input.
    static func read(from reader: inout ByteReader) -> [Operation]? {
        guard !reader.isAtEnd else { return nil }
        let op = reader.byte()
        let connection = Int(op >> 6)
        let kind = Int(op & 0x3F)
        // Requests (all kinds but 32...38) carry a one-byte request id next.
        let id: UInt64 = (32...38).contains(kind) ? 0 : UInt64(reader.byte())
        switch kind {
        case 0..<32:
            let (namespace, method) = methodTable[kind]
            let length = Int(reader.byte())
            let body = Data(reader.bytes(length))
            return [.request(connection: connection, Call(id: id, namespace: namespace, method: method, body: body))]
        case 32: return [.attach(connection: connection)]
        case 33: return [.detach(connection: connection)]
        case 34: return [.setAccepting(connection: connection, false)]
        case 35: return [.setAccepting(connection: connection, true), .drained(connection: connection)]
        case 36: return [.barrier]
        case 37: return [.shutdown]
        case 38:
            let length = Int(reader.byte()) << 8 | Int(reader.byte())
            var frame = ByteBuffer()
            frame.writeBytes(reader.bytes(length))
            guard let envelope = try? Mentory_V1_Envelope(frame: frame) else { return [] }
            switch envelope.kind {
            case .hello(let hello):
                // The server closes the connection on an unsupported version instead of attaching.
                return hello.protocolVersion == WireProtocol.version ? [.attach(connection: connection)] : []
            case .request(let request):
                return [
                    .request(
                        connection: connection,
                        Call(id: request.id, namespace: request.namespace, method: request.method, body: request.body)
                    )
                ]
            default:
                return []
            }
        case 39: return [.built(connection, id, .subscribe(topics: reader.byte(), resume: reader.byte()))]
        case 40: return [.built(connection, id, .unsubscribe(topics: reader.byte()))]
        case 41: return [.built(connection, id, .mentorSet(reader.byte(), reader.byte()))]
        case 42: return [.built(connection, id, .mentorComplete(reader.byte()))]
        case 43: return [.built(connection, id, .report(reader.byte()))]
        case 44: return [.built(connection, id, .diaryAdd(reader.byte(), reader.byte(), reader.byte()))]
        case 45: return [.built(connection, id, .diaryRef(reader.byte(), reader.byte(), reader.byte()))]
        case 46: return [.built(connection, id, .diaryList(reader.byte(), reader.byte()))]
        default:
            let (namespace, method) = methodTable[kind & 0x1F]
            return [.request(connection: connection, Call(id: id, namespace: namespace, method: method, body: Data()))]
        }
    }
}

/// A position a subscribe request asks to resume a topic from.
struct Resume: Sendable, Equatable {
    var topic: String
    var after: UInt64
}

extension Operation {
    /// A structured request; ``Model/build(_:)`` fills in its namespace, method and body when it runs.
    static func built(_ connection: Int, _ id: UInt64, _ built: Built) -> Operation {
        var call = Call(id: id, namespace: "", method: "", body: Data())
        call.built = built
        return .request(connection: connection, call)
    }
}
