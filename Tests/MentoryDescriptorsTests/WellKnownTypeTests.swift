import Foundation
import MentoryDomain
import MentoryWire
import SwiftProtobuf
import Testing

@testable import MentoryDescriptors

/// Timestamp, Duration, FieldMask, Struct, Value, ListValue and Any against SwiftProtobuf's JSON.
@Suite("Descriptor-driven transcoding: well-known types")
struct WellKnownTypeTests {
    /// protoc's descriptors of timestamp, duration, struct, field_mask, any and empty.proto (protoc
    /// -I/usr/include --descriptor_set_out), with mentory.proto's, for Any to hold mentory messages.
    static let pool: DescriptorPool = {
        let wellKnown = """
            Cv8BCh9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvEg9nb29nbGUucHJvdG9idWYiOwoJVGltZXN0YW1wEhgKB3NlY29u
            ZHMYASABKANSB3NlY29uZHMSFAoFbmFub3MYAiABKAVSBW5hbm9zQoUBChNjb20uZ29vZ2xlLnByb3RvYnVmQg5UaW1lc3RhbXBQ
            cm90b1ABWjJnb29nbGUuZ29sYW5nLm9yZy9wcm90b2J1Zi90eXBlcy9rbm93bi90aW1lc3RhbXBwYvgBAaICA0dQQqoCHkdvb2ds
            ZS5Qcm90b2J1Zi5XZWxsS25vd25UeXBlc2IGcHJvdG8zCvsBCh5nb29nbGUvcHJvdG9idWYvZHVyYXRpb24ucHJvdG8SD2dvb2ds
            ZS5wcm90b2J1ZiI6CghEdXJhdGlvbhIYCgdzZWNvbmRzGAEgASgDUgdzZWNvbmRzEhQKBW5hbm9zGAIgASgFUgVuYW5vc0KDAQoT
            Y29tLmdvb2dsZS5wcm90b2J1ZkINRHVyYXRpb25Qcm90b1ABWjFnb29nbGUuZ29sYW5nLm9yZy9wcm90b2J1Zi90eXBlcy9rbm93
            bi9kdXJhdGlvbnBi+AEBogIDR1BCqgIeR29vZ2xlLlByb3RvYnVmLldlbGxLbm93blR5cGVzYgZwcm90bzMK4gUKHGdvb2dsZS9w
            cm90b2J1Zi9zdHJ1Y3QucHJvdG8SD2dvb2dsZS5wcm90b2J1ZiKYAQoGU3RydWN0EjsKBmZpZWxkcxgBIAMoCzIjLmdvb2dsZS5w
            cm90b2J1Zi5TdHJ1Y3QuRmllbGRzRW50cnlSBmZpZWxkcxpRCgtGaWVsZHNFbnRyeRIQCgNrZXkYASABKAlSA2tleRIsCgV2YWx1
            ZRgCIAEoCzIWLmdvb2dsZS5wcm90b2J1Zi5WYWx1ZVIFdmFsdWU6AjgBIrICCgVWYWx1ZRI7CgpudWxsX3ZhbHVlGAEgASgOMhou
            Z29vZ2xlLnByb3RvYnVmLk51bGxWYWx1ZUgAUgludWxsVmFsdWUSIwoMbnVtYmVyX3ZhbHVlGAIgASgBSABSC251bWJlclZhbHVl
            EiMKDHN0cmluZ192YWx1ZRgDIAEoCUgAUgtzdHJpbmdWYWx1ZRIfCgpib29sX3ZhbHVlGAQgASgISABSCWJvb2xWYWx1ZRI8Cgxz
            dHJ1Y3RfdmFsdWUYBSABKAsyFy5nb29nbGUucHJvdG9idWYuU3RydWN0SABSC3N0cnVjdFZhbHVlEjsKCmxpc3RfdmFsdWUYBiAB
            KAsyGi5nb29nbGUucHJvdG9idWYuTGlzdFZhbHVlSABSCWxpc3RWYWx1ZUIGCgRraW5kIjsKCUxpc3RWYWx1ZRIuCgZ2YWx1ZXMY
            ASADKAsyFi5nb29nbGUucHJvdG9idWYuVmFsdWVSBnZhbHVlcyobCglOdWxsVmFsdWUSDgoKTlVMTF9WQUxVRRAAQn8KE2NvbS5n
            b29nbGUucHJvdG9idWZCC1N0cnVjdFByb3RvUAFaL2dvb2dsZS5nb2xhbmcub3JnL3Byb3RvYnVmL3R5cGVzL2tub3duL3N0cnVj
            dHBi+AEBogIDR1BCqgIeR29vZ2xlLlByb3RvYnVmLldlbGxLbm93blR5cGVzYgZwcm90bzMK5gEKIGdvb2dsZS9wcm90b2J1Zi9m
            aWVsZF9tYXNrLnByb3RvEg9nb29nbGUucHJvdG9idWYiIQoJRmllbGRNYXNrEhQKBXBhdGhzGAEgAygJUgVwYXRoc0KFAQoTY29t
            Lmdvb2dsZS5wcm90b2J1ZkIORmllbGRNYXNrUHJvdG9QAVoyZ29vZ2xlLmdvbGFuZy5vcmcvcHJvdG9idWYvdHlwZXMva25vd24v
            ZmllbGRtYXNrcGL4AQGiAgNHUEKqAh5Hb29nbGUuUHJvdG9idWYuV2VsbEtub3duVHlwZXNiBnByb3RvMwrkAQoZZ29vZ2xlL3By
            b3RvYnVmL2FueS5wcm90bxIPZ29vZ2xlLnByb3RvYnVmIjYKA0FueRIZCgh0eXBlX3VybBgBIAEoCVIHdHlwZVVybBIUCgV2YWx1
            ZRgCIAEoDFIFdmFsdWVCdgoTY29tLmdvb2dsZS5wcm90b2J1ZkIIQW55UHJvdG9QAVosZ29vZ2xlLmdvbGFuZy5vcmcvcHJvdG9i
            dWYvdHlwZXMva25vd24vYW55cGKiAgNHUEKqAh5Hb29nbGUuUHJvdG9idWYuV2VsbEtub3duVHlwZXNiBnByb3RvMwq+AQobZ29v
            Z2xlL3Byb3RvYnVmL2VtcHR5LnByb3RvEg9nb29nbGUucHJvdG9idWYiBwoFRW1wdHlCfQoTY29tLmdvb2dsZS5wcm90b2J1ZkIK
            RW1wdHlQcm90b1ABWi5nb29nbGUuZ29sYW5nLm9yZy9wcm90b2J1Zi90eXBlcy9rbm93bi9lbXB0eXBi+AEBogIDR1BCqgIeR29v
            Z2xlLlByb3RvYnVmLldlbGxLbm93blR5cGVzYgZwcm90bzM=
            """.filter { !$0.isWhitespace }
        do {
            let set = try Google_Protobuf_FileDescriptorSet(serializedBytes: Data(base64Encoded: wellKnown) ?? Data())
            let schema = SchemaDescriptors.merged([MentoryDomainSchema.fileDescriptors])
            return try DescriptorPool(files: set.file + schema.file)
        } catch {
            fatalError("the well-known descriptors do not build a pool: \(error)")
        }
    }()

    static func check<M: SwiftProtobuf.Message & Equatable>(
        _ message: M, json expected: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let name = M.protoMessageName
        let ours = try Self.pool.jsonString(fromBinary: try message.serializedBytes(), messageName: name)
        let theirs = try message.jsonString()
        #expect(
            try Canonical(ours) == Canonical(theirs), "ours: \(ours)\ntheirs: \(theirs)", sourceLocation: sourceLocation
        )
        if let expected { #expect(ours == expected, sourceLocation: sourceLocation) }
        let back = try Self.pool.binary(fromJSON: ours, messageName: name)
        #expect(try M(serializedBytes: back) == message, sourceLocation: sourceLocation)
        let fromTheirs = try Self.pool.binary(fromJSON: theirs, messageName: name)
        #expect(try M(serializedBytes: fromTheirs) == message, sourceLocation: sourceLocation)
    }

    @Test("Timestamp: RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, years 1 to 9999")
    func timestamp() throws {
        try Self.check(Google_Protobuf_Timestamp(seconds: 0, nanos: 0), json: #""1970-01-01T00:00:00Z""#)
        try Self.check(Google_Protobuf_Timestamp(seconds: 1_795_000_000, nanos: 500_000_000))
        try Self.check(Google_Protobuf_Timestamp(seconds: -1, nanos: 999_999_999))
        try Self.check(Google_Protobuf_Timestamp(seconds: 951_782_400, nanos: 1_000))  // 2000-02-29
        try Self.check(Google_Protobuf_Timestamp(seconds: -62_135_596_800, nanos: 0), json: #""0001-01-01T00:00:00Z""#)
        try Self.check(Google_Protobuf_Timestamp(seconds: 253_402_300_799, nanos: 999_999_999))
        let offset = try Self.pool.binary(
            fromJSON: #""1970-01-01T01:00:00.25+01:00""#, messageName: "google.protobuf.Timestamp")
        #expect(
            try Google_Protobuf_Timestamp(serializedBytes: offset)
                == Google_Protobuf_Timestamp(seconds: 0, nanos: 250_000_000))
        for bad in [
            #""1970-02-30T00:00:00Z""#, #""1970-01-01 00:00:00Z""#, #""1970-01-01T00:00:00""#, "0",
            #""10000-01-01T00:00:00Z""#,
        ] {
            #expect(throws: DescriptorError.self, "\(bad)") {
                try Self.pool.binary(fromJSON: bad, messageName: "google.protobuf.Timestamp")
            }
        }
    }

    @Test("Duration: seconds with a fraction and a sign")
    func duration() throws {
        try Self.check(Google_Protobuf_Duration(seconds: 1, nanos: 500_000_000), json: #""1.500s""#)
        try Self.check(Google_Protobuf_Duration(seconds: 0, nanos: -1_000))
        try Self.check(Google_Protobuf_Duration(seconds: -315_576_000_000, nanos: 0))
        try Self.check(Google_Protobuf_Duration(seconds: 0, nanos: 0), json: #""0s""#)
        for bad in [#""1""#, #""1.5 s""#, #""1.0000000001s""#, #""-s""#, "1"] {
            #expect(throws: DescriptorError.self, "\(bad)") {
                try Self.pool.binary(fromJSON: bad, messageName: "google.protobuf.Duration")
            }
        }
    }

    @Test("FieldMask: comma-separated lowerCamelCase paths")
    func fieldMask() throws {
        try Self.check(
            Google_Protobuf_FieldMask.with { $0.paths = ["record_date", "action_items.done"] },
            json: #""recordDate,actionItems.done""#)
        try Self.check(Google_Protobuf_FieldMask())
    }

    @Test("Struct, Value and ListValue: plain JSON, null included")
    func structs() throws {
        let inner: Google_Protobuf_Struct = ["four": 4]
        let deeper: Google_Protobuf_Struct = ["x": 1.5]
        let list: Google_Protobuf_ListValue = [
            1, "two", Google_Protobuf_Value(listValue: [3]), Google_Protobuf_Value(structValue: inner),
        ]
        let object: Google_Protobuf_Struct = [
            "name": "mentor", "count": 3, "ok": true, "none": nil, "list": Google_Protobuf_Value(listValue: list),
            "nested": Google_Protobuf_Value(structValue: ["deeper": Google_Protobuf_Value(structValue: deeper)]),
        ]
        try Self.check(object)
        try Self.check(Google_Protobuf_Value(nilLiteral: ()), json: "null")
        try Self.check(Google_Protobuf_Value(stringValue: "x"), json: #""x""#)
        try Self.check(Google_Protobuf_ListValue(values: [1, nil, "a"]))
        try Self.check(Google_Protobuf_Struct())
    }

    @Test("Any: @type and the fields of the message it holds, or value for a well-known type")
    func any() throws {
        let request = Mentory_V1_DiaryGetRequest.with { $0.id = "abc" }
        let any = try Google_Protobuf_Any(message: request)
        let json = try Self.pool.jsonString(fromBinary: try any.serializedBytes(), messageName: "google.protobuf.Any")
        #expect(json == #"{"@type":"type.googleapis.com/mentory.v1.DiaryGetRequest","id":"abc"}"#)
        #expect(try Canonical(json) == Canonical(try any.jsonString()))
        let back = try Self.pool.binary(fromJSON: json, messageName: "google.protobuf.Any")
        let decoded = try Google_Protobuf_Any(serializedBytes: back)
        #expect(try Mentory_V1_DiaryGetRequest(unpackingAny: decoded) == request)

        let wrapped = try Google_Protobuf_Any(message: Google_Protobuf_Duration(seconds: 3, nanos: 0))
        let wrappedJSON = try Self.pool.jsonString(
            fromBinary: try wrapped.serializedBytes(), messageName: "google.protobuf.Any")
        #expect(wrappedJSON == #"{"@type":"type.googleapis.com/google.protobuf.Duration","value":"3s"}"#)
        #expect(try Canonical(wrappedJSON) == Canonical(try wrapped.jsonString()))
        let wrappedBack = try Self.pool.binary(fromJSON: wrappedJSON, messageName: "google.protobuf.Any")
        #expect(try Google_Protobuf_Any(serializedBytes: wrappedBack).value == wrapped.value)

        #expect(try Self.pool.jsonString(fromBinary: Data(), messageName: "google.protobuf.Any") == "{}")
        #expect(throws: DescriptorError.self) {
            try Self.pool.binary(
                fromJSON: #"{"@type": "type.googleapis.com/x.Nope"}"#, messageName: "google.protobuf.Any")
        }
        #expect(throws: DescriptorError.self) {
            try Self.pool.binary(fromJSON: #"{"id": "x"}"#, messageName: "google.protobuf.Any")
        }
        // Any inside Any inside ...: bounded like any nesting.
        var nested: Data = try any.serializedBytes()
        for _ in 0..<70 {
            nested = try Google_Protobuf_Any.with {
                $0.typeURL = "type.googleapis.com/google.protobuf.Any"
                $0.value = nested
            }.serializedBytes()
        }
        let tooDeep = #expect(throws: DescriptorError.self) {
            try Self.pool.jsonString(fromBinary: nested, messageName: "google.protobuf.Any")
        }
        #expect(tooDeep?.kind == .limitExceeded)
    }
}
