import Foundation
import MentoryDomain
import MentoryWire
import SwiftProtobuf
import Testing

@testable import MentoryDescriptors

/// The transcoder against SwiftProtobuf's generated code for the built-in messages: SwiftProtobuf's
/// JSON is the oracle for binary -> JSON, and SwiftProtobuf's binary decoder for JSON -> binary.
@Suite("Descriptor-driven transcoding")
struct TranscodingTests {
    static let pool: DescriptorPool = {
        do {
            return try DescriptorPool(SchemaDescriptors.merged([MentoryDomainSchema.fileDescriptors]))
        } catch {
            fatalError("the built-in descriptors do not build a pool: \(error)")
        }
    }()

    /// Binary -> our JSON equals SwiftProtobuf's JSON (as parsed JSON); our JSON -> binary decodes to
    /// the message; SwiftProtobuf reads our JSON; we read SwiftProtobuf's JSON.
    static func checkRoundTrip<M: SwiftProtobuf.Message & Equatable>(
        _ message: M, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let name = M.protoMessageName
        let binary: Data = try message.serializedBytes()
        let ours = try Self.pool.jsonString(fromBinary: binary, messageName: name)
        let theirs = try message.jsonString()
        #expect(
            try Canonical(ours) == Canonical(theirs), "ours: \(ours)\ntheirs: \(theirs)", sourceLocation: sourceLocation
        )
        let back = try Self.pool.binary(fromJSON: ours, messageName: name)
        #expect(try M(serializedBytes: back) == message, sourceLocation: sourceLocation)
        #expect(try M(jsonString: ours) == message, sourceLocation: sourceLocation)
        let fromTheirs = try Self.pool.binary(fromJSON: theirs, messageName: name)
        #expect(try M(serializedBytes: fromTheirs) == message, sourceLocation: sourceLocation)
        let pretty = try Self.pool.jsonString(
            fromBinary: binary, messageName: name, options: JSONOutputOptions(pretty: true))
        #expect(try Canonical(pretty) == Canonical(ours), sourceLocation: sourceLocation)
    }

    static func item(_ id: String, _ text: String, done: Bool) -> Mentory_V1_ActionItem {
        Mentory_V1_ActionItem.with {
            $0.id = id
            $0.text = text
            $0.done = done
        }
    }

    static let entry = Mentory_V1_DiaryEntry.with {
        $0.id = "6c1d6f0e-3f4e-4c38-9a59-0e7f0b2b8a11"
        $0.recordDate = "2026-11-22"
        $0.createdAtUnixMs = 1_795_000_000_123
        $0.title = "Quotes \" and \\ backslashes"
        $0.text = "Line one\nLine two\tтекст 日本語 🙂 \u{01} \u{2028}"
        $0.emotion = .slightlyPleasant
        $0.analysis = ""
        $0.actionItems = [Self.item("a", "walk", done: true), Self.item("", "sleep", done: false)]
    }

    @Test("DiaryAddRequest: strings, enum, proto3 optional set to its default, repeated messages, int64")
    func diaryAddRequest() throws {
        try Self.checkRoundTrip(
            Mentory_V1_DiaryAddRequest.with {
                $0.recordDate = "2026-11-22"
                $0.title = "Saturday"
                $0.text = "A quiet day."
                $0.emotion = .veryPleasant
                $0.analysis = ""
                $0.actionItems = [Self.item("x", "one", done: false), Self.item("y", "two", done: true)]
                $0.id = "id-1"
                $0.createdAtUnixMs = -9_007_199_254_740_993
            })
        try Self.checkRoundTrip(Mentory_V1_DiaryAddRequest())
        let json = try Self.pool.jsonString(
            fromBinary: try Mentory_V1_DiaryAddRequest.with { $0.createdAtUnixMs = 5 }.serializedBytes(),
            messageName: "mentory.v1.DiaryAddRequest")
        #expect(json == #"{"createdAtUnixMs":"5"}"#, "64-bit integers are strings, defaults are left out")
    }

    @Test("DiaryChange: each member of the oneof, including one at its default value")
    func diaryChange() throws {
        try Self.checkRoundTrip(Mentory_V1_DiaryChange.with { $0.added = Self.entry })
        try Self.checkRoundTrip(Mentory_V1_DiaryChange.with { $0.updated = Mentory_V1_DiaryEntry() })
        try Self.checkRoundTrip(Mentory_V1_DiaryChange.with { $0.deletedID = "" })
        try Self.checkRoundTrip(Mentory_V1_DiaryChange())
        let json = try Self.pool.jsonString(
            fromBinary: try Mentory_V1_DiaryChange.with { $0.deletedID = "" }.serializedBytes(),
            messageName: "mentory.v1.DiaryChange")
        #expect(json == #"{"deletedId":""}"#)
    }

    @Test("a later oneof member in the binary replaces an earlier one")
    func oneofLastWins() throws {
        var binary: Data = try Mentory_V1_DiaryChange.with { $0.added = Self.entry }.serializedBytes()
        binary += try Mentory_V1_DiaryChange.with { $0.deletedID = "gone" }.serializedBytes() as Data
        let json = try Self.pool.jsonString(fromBinary: binary, messageName: "mentory.v1.DiaryChange")
        #expect(json == #"{"deletedId":"gone"}"#)
    }

    @Test("DiaryListRequest and TopicSubscription: proto3 optional present at zero, and absent")
    func optionalPresence() throws {
        try Self.checkRoundTrip(Mentory_V1_DiaryListRequest.with { $0.before = "" })
        try Self.checkRoundTrip(Mentory_V1_DiaryListRequest.with { $0.limit = 10 })
        try Self.checkRoundTrip(
            Mentory_V1_DiaryListRequest.with {
                $0.limit = 4_294_967_295
                $0.before = "2026-11-01"
            })
        try Self.checkRoundTrip(Mentory_V1_TopicSubscription.with { $0.resumeAfter = 0 })
        try Self.checkRoundTrip(
            Mentory_V1_SubscribeRequest.with {
                $0.topics = [
                    Mentory_V1_TopicSubscription.with {
                        $0.topic = "diary"
                        $0.resumeAfter = 18_446_744_073_709_551_615
                        $0.epoch = 42
                    }
                ]
            })
        let absent = try Self.pool.jsonString(
            fromBinary: Data(), messageName: "mentory.v1.TopicSubscription")
        #expect(absent == "{}")
        let zero = try Self.pool.jsonString(
            fromBinary: try Mentory_V1_TopicSubscription.with { $0.resumeAfter = 0 }.serializedBytes(),
            messageName: "mentory.v1.TopicSubscription")
        #expect(zero == #"{"resumeAfter":"0"}"#)
    }

    @Test("StatusReply: doubles, uint32, uint64, repeated messages and repeated strings")
    func statusReply() throws {
        for uptime in [0, 1.5, 0.1, 1e300, Double.leastNonzeroMagnitude, -2.75, Double.infinity, -Double.infinity] {
            try Self.checkRoundTrip(
                Mentory_V1_StatusReply.with {
                    $0.serverVersion = "0.1.0"
                    $0.uptimeSeconds = uptime
                    $0.connections = 3
                    $0.handlers = [
                        Mentory_V1_HandlerDescription.with {
                            $0.namespace = "diary"
                            $0.methods = ["add", "get", ""]
                            $0.topics = ["diary"]
                        },
                        Mentory_V1_HandlerDescription(),
                    ]
                    $0.subscribers = 1
                    $0.topics = [
                        Mentory_V1_TopicPosition.with {
                            $0.topic = "mentor"; $0.sequence = 9
                        }
                    ]
                    $0.epoch = UInt64.max
                })
        }
        let nan = try Self.pool.jsonString(
            fromBinary: try Mentory_V1_StatusReply.with { $0.uptimeSeconds = .nan }.serializedBytes(),
            messageName: "mentory.v1.StatusReply")
        #expect(nan == #"{"uptimeSeconds":"NaN"}"#)
    }

    @Test("enums: by name, and by number when the enum has no name for it")
    func enums() throws {
        try Self.checkRoundTrip(Mentory_V1_DiaryEntry.with { $0.emotion = .UNRECOGNIZED(42) })
        try Self.checkRoundTrip(Mentory_V1_MentorSetRequest.with { $0.character = .warm })
        let byNumber = try Self.pool.binary(fromJSON: #"{"emotion":6}"#, messageName: "mentory.v1.DiaryAddRequest")
        #expect(try Mentory_V1_DiaryAddRequest(serializedBytes: byNumber).emotion == .pleasant)
    }

    @Test("bytes as base64 and the Event envelope")
    func bytesAndEvents() throws {
        try Self.checkRoundTrip(
            Mentory_V1_Event.with {
                $0.topic = "diary"
                $0.sequence = 12
                $0.kind = .reset
                $0.body = Data([0, 1, 2, 250, 251, 252, 253, 254, 255])
                $0.epoch = 77
            })
        try Self.checkRoundTrip(Mentory_V1_StorageBackupReadReply.with { $0.data = Data(repeating: 7, count: 1000) })
        let urlSafe = try Self.pool.binary(
            fromJSON: #"{"data":"-_8"}"#, messageName: "mentory.v1.StorageBackupReadReply")
        #expect(try Mentory_V1_StorageBackupReadReply(serializedBytes: urlSafe).data == Data([0xFB, 0xFF]))
    }

    @Test("nested messages: MentorState, Envelope, DiarySnapshot")
    func nested() throws {
        try Self.checkRoundTrip(Mentory_V1_MentorState.with { $0.message = Mentory_V1_MentorMessage() })
        try Self.checkRoundTrip(
            Mentory_V1_MentorState.with {
                $0.message = Mentory_V1_MentorMessage.with {
                    $0.content = "Drink water."
                    $0.character = .cool
                    $0.actionItems = [Self.item("1", "glass", done: true)]
                    $0.updatedAtUnixMs = 1
                }
            })
        try Self.checkRoundTrip(
            Mentory_V1_Envelope.with {
                $0.response = Mentory_V1_Response.with {
                    $0.id = 3
                    $0.error = Mentory_V1_Error.with {
                        $0.code = 9
                        $0.message = "not found"
                        $0.reason = "diary.not_found"
                    }
                }
            })
        try Self.checkRoundTrip(
            Mentory_V1_DiarySnapshot.with {
                $0.entries = [Self.entry, Self.entry]; $0.nextBefore = "2026-01-01"
            })
    }

    @Test("DescribeReply with the whole FileDescriptorSet nested (proto2 messages with presence)")
    func describeReply() throws {
        var reply = Mentory_V1_DescribeReply()
        reply.namespaces = (MentorySchema.namespaces + MentoryDomainSchema.namespaces).map(\.wireDescription)
        reply.descriptors = SchemaDescriptors.merged([MentoryDomainSchema.fileDescriptors])
        // The service options' extensions are unknown fields to SwiftProtobuf and to us, and JSON
        // drops them; compare with the message as JSON can carry it.
        let carried = try Mentory_V1_DescribeReply(jsonString: try reply.jsonString())
        try Self.checkRoundTrip(carried)
        // descriptor.proto, wrappers.proto, mentory.proto and mentory_domain.proto.
        #expect(carried.descriptors.file.count == 4)
    }

    @Test("well-known wrappers are bare values and Empty is {}")
    func wellKnownTypes() throws {
        try Self.checkRoundTrip(Google_Protobuf_UInt32Value(7))
        try Self.checkRoundTrip(Google_Protobuf_UInt32Value(0))
        try Self.checkRoundTrip(Mentory_V1_Empty())
        #expect(try Self.pool.jsonString(fromBinary: Data(), messageName: "google.protobuf.UInt32Value") == "0")
        #expect(try Self.pool.jsonString(fromBinary: Data(), messageName: "mentory.v1.Empty") == "{}")
        let seven = try Self.pool.binary(fromJSON: "7", messageName: "google.protobuf.UInt32Value")
        #expect(try Google_Protobuf_UInt32Value(serializedBytes: seven).value == 7)
        let asString = try Self.pool.binary(fromJSON: #""7""#, messageName: "google.protobuf.UInt32Value")
        #expect(try Google_Protobuf_UInt32Value(serializedBytes: asString).value == 7)
        let empty = try Self.pool.binary(fromJSON: "{}", messageName: "google.protobuf.UInt32Value")
        #expect(empty.isEmpty, "{}, every request's default body, is a wrapper's default value")
        for wrapper: any SwiftProtobuf.Message in [
            Google_Protobuf_StringValue("hé"), Google_Protobuf_Int64Value(-5), Google_Protobuf_BoolValue(true),
            Google_Protobuf_DoubleValue(2.5), Google_Protobuf_BytesValue(Data([1, 2])),
            Google_Protobuf_FloatValue(0.1), Google_Protobuf_UInt64Value(UInt64.max), Google_Protobuf_Int32Value(-1),
        ] {
            let type = Swift.type(of: wrapper).protoMessageName
            let ours = try Self.pool.jsonString(fromBinary: try wrapper.serializedBytes(), messageName: type)
            #expect(try Canonical(ours) == Canonical(try wrapper.jsonString()), "\(type): \(ours)")
            let back = try Self.pool.binary(fromJSON: ours, messageName: type)
            #expect(back == (try wrapper.serializedBytes() as Data), "\(type)")
        }
        #expect(
            try Self.pool.jsonString(
                fromBinary: Google_Protobuf_FloatValue(0.1).serializedBytes(),
                messageName: "google.protobuf.FloatValue") == "0.1", "floats print at their own precision")
    }

    @Test("input: .proto names, numbers as strings, 64-bit numbers, exponents, null, escapes")
    func lenientInput() throws {
        let binary = try Self.pool.binary(
            fromJSON: """
                {"record_date": "2026-01-02", "createdAtUnixMs": 12, "emotion": "EMOTION_NEUTRAL",
                 "analysis": null, "title": "\\u00e9\\ud83d\\ude42", "actionItems": [{"done": true}],
                 "id": null}
                """,
            messageName: "mentory.v1.DiaryAddRequest")
        let request = try Mentory_V1_DiaryAddRequest(serializedBytes: binary)
        #expect(request.recordDate == "2026-01-02")
        #expect(request.createdAtUnixMs == 12)
        #expect(request.emotion == .neutral)
        #expect(!request.hasAnalysis)
        #expect(request.title == "é🙂")
        #expect(request.actionItems.map(\.done) == [true])
        let numbers = try Self.pool.binary(
            fromJSON: #"{"limit": "1e2"}"#, messageName: "mentory.v1.DiaryListRequest")
        #expect(try Mentory_V1_DiaryListRequest(serializedBytes: numbers).limit == 100)
        let big = try Self.pool.binary(
            fromJSON: #"{"epoch": 18446744073709551615, "uptimeSeconds": "2.5"}"#, messageName: "mentory.v1.StatusReply"
        )
        let status = try Mentory_V1_StatusReply(serializedBytes: big)
        #expect(status.epoch == UInt64.max)
        #expect(status.uptimeSeconds == 2.5)
    }

    @Test("unknown fields in the binary are skipped")
    func unknownBinaryFields() throws {
        var binary: Data = try Mentory_V1_DiaryGetRequest.with { $0.id = "abc" }.serializedBytes()
        // field 99 varint 300; field 100 length-delimited "hi"; field 101 a group holding field 1 varint 1;
        // field 102 fixed32; field 103 fixed64.
        binary += Data([0x98, 0x06, 0xAC, 0x02])
        binary += Data([0xA2, 0x06, 0x02, 0x68, 0x69])
        binary += Data([0xAB, 0x06, 0x08, 0x01, 0xAC, 0x06])
        binary += Data([0xB5, 0x06, 1, 2, 3, 4])
        binary += Data([0xB9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8])
        let json = try Self.pool.jsonString(fromBinary: binary, messageName: "mentory.v1.DiaryGetRequest")
        #expect(json == #"{"id":"abc"}"#)
    }

    @Test("output is deterministic, in field-number order, and pretty-printing indents it")
    func deterministicOutput() throws {
        let binary: Data = try Self.entry.serializedBytes()
        let first = try Self.pool.jsonString(fromBinary: binary, messageName: "mentory.v1.DiaryEntry")
        let second = try Self.pool.jsonString(fromBinary: binary, messageName: "mentory.v1.DiaryEntry")
        #expect(first == second)
        let keys = ["\"id\"", "\"recordDate\"", "\"createdAtUnixMs\"", "\"title\"", "\"text\"", "\"emotion\""]
        let offsets = keys.map { first.range(of: $0)?.lowerBound }
        #expect(offsets.allSatisfy { $0 != nil })
        #expect(offsets.compactMap { $0 } == offsets.compactMap { $0 }.sorted())
        let pretty = try Self.pool.jsonString(
            fromBinary: try Mentory_V1_DiaryGetRequest.with { $0.id = "x" }.serializedBytes(),
            messageName: "mentory.v1.DiaryGetRequest", options: JSONOutputOptions(pretty: true))
        #expect(pretty == "{\n  \"id\": \"x\"\n}")
        let numbers = try Self.pool.jsonString(
            fromBinary: try Mentory_V1_TopicPosition.with { $0.sequence = 5 }.serializedBytes(),
            messageName: "mentory.v1.TopicPosition", options: JSONOutputOptions(int64AsNumbers: true))
        #expect(numbers == #"{"sequence":5}"#)
    }
}

/// JSON parsed into a form where equal documents compare equal: members sorted, numbers as doubles.
enum Canonical: Equatable {
    case null, bool(Bool), number(Double), string(String), array([Canonical]), object([String: Canonical])

    init(_ text: String) throws {
        self.init(try JSONParser.parse(Array(text.utf8), maxDepth: 1000))
    }

    init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let value): self = .bool(value)
        case .number(let text): self = .number(Double(text) ?? .nan)
        case .string(let text): self = .string(text)
        case .array(let elements): self = .array(elements.map(Canonical.init))
        case .object(let members):
            self = .object(Dictionary(members.map { ($0.key, Canonical($0.value)) }) { first, _ in first })
        }
    }
}
