import Foundation
import MentoryWire
import SwiftProtobuf
import Testing

@testable import MentoryDescriptors

/// Maps, packing, the integer encodings mentory.proto does not use, and every kind of failure.
@Suite("Descriptor-driven transcoding: maps, encodings and errors")
struct TranscodingErrorTests {
    static let pool = TranscodingTests.pool

    /// `test.Sample`: a proto3 message with every scalar encoding, packed and unpacked lists and maps.
    static func samplePool(limits: TranscodingLimits = TranscodingLimits()) throws -> DescriptorPool {
        func field(
            _ name: String, _ number: Int32, _ type: Google_Protobuf_FieldDescriptorProto.TypeEnum,
            repeated: Bool = false, typeName: String? = nil, jsonName: String? = nil, packed: Bool? = nil
        ) -> Google_Protobuf_FieldDescriptorProto {
            Google_Protobuf_FieldDescriptorProto.with {
                $0.name = name
                $0.number = number
                $0.type = type
                $0.label = repeated ? .repeated : .optional
                if let typeName { $0.typeName = typeName }
                if let jsonName { $0.jsonName = jsonName }
                if let packed { $0.options.packed = packed }
            }
        }
        func entry(
            _ name: String, key: Google_Protobuf_FieldDescriptorProto.TypeEnum,
            value: Google_Protobuf_FieldDescriptorProto.TypeEnum, valueType: String? = nil
        ) -> Google_Protobuf_DescriptorProto {
            Google_Protobuf_DescriptorProto.with {
                $0.name = name
                $0.field = [field("key", 1, key), field("value", 2, value, typeName: valueType)]
                $0.options.mapEntry = true
            }
        }
        let sample = Google_Protobuf_DescriptorProto.with {
            $0.name = "Sample"
            $0.field = [
                field("s32", 1, .sint32), field("s64", 2, .sint64), field("f32", 3, .fixed32),
                field("f64", 4, .fixed64), field("sf32", 5, .sfixed32), field("sf64", 6, .sfixed64),
                field("fl", 7, .float), field("packed", 8, .int32, repeated: true),
                field("unpacked", 9, .int32, repeated: true, packed: false),
                field("counts", 10, .message, repeated: true, typeName: ".test.Sample.CountsEntry"),
                field("children", 11, .message, repeated: true, typeName: ".test.Sample.ChildrenEntry"),
                field("flags", 12, .message, repeated: true, typeName: ".test.Sample.FlagsEntry"),
                field("raw", 13, .bytes), field("json_named", 14, .int32, jsonName: "custom"),
                field("child", 15, .message, typeName: ".test.Sample"),
            ]
            $0.nestedType = [
                entry("CountsEntry", key: .string, value: .int64),
                entry("ChildrenEntry", key: .int32, value: .message, valueType: ".test.Sample"),
                entry("FlagsEntry", key: .bool, value: .string),
            ]
        }
        let file = Google_Protobuf_FileDescriptorProto.with {
            $0.name = "test.proto"
            $0.package = "test"
            $0.syntax = "proto3"
            $0.messageType = [sample]
        }
        return try DescriptorPool(files: [file], limits: limits)
    }

    static func roundTrip(_ pool: DescriptorPool, _ json: String) throws -> (binary: Data, json: String) {
        let binary = try pool.binary(fromJSON: json, messageName: "test.Sample")
        return (binary, try pool.jsonString(fromBinary: binary, messageName: "test.Sample"))
    }

    @Test("zigzag, fixed-width and float encodings, with their exact bytes")
    func encodings() throws {
        let pool = try Self.samplePool()
        #expect(try Self.roundTrip(pool, #"{"s32": -1}"#).binary == Data([0x08, 0x01]))
        #expect(try Self.roundTrip(pool, #"{"s64": "-2"}"#).binary == Data([0x10, 0x03]))
        #expect(try Self.roundTrip(pool, #"{"f32": 1}"#).binary == Data([0x1D, 1, 0, 0, 0]))
        #expect(try Self.roundTrip(pool, #"{"sf32": -1}"#).binary == Data([0x2D, 0xFF, 0xFF, 0xFF, 0xFF]))
        let all =
            #"{"s32":-2147483648,"s64":"-9223372036854775808","f32":4294967295,"f64":"18446744073709551615","#
            + #""sf32":-7,"sf64":"-8","fl":1.5,"raw":"AAE=","custom":3}"#
        #expect(try Canonical(Self.roundTrip(pool, all).json) == Canonical(all))
        #expect(try Self.roundTrip(pool, #"{"json_named": 3}"#).json == #"{"custom":3}"#)
    }

    @Test("repeated scalars: packed by default, unpacked when the descriptor says so, either read")
    func packing() throws {
        let pool = try Self.samplePool()
        #expect(try Self.roundTrip(pool, #"{"packed": [1, 2]}"#).binary == Data([0x42, 0x02, 0x01, 0x02]))
        #expect(try Self.roundTrip(pool, #"{"unpacked": [1, 2]}"#).binary == Data([0x48, 0x01, 0x48, 0x02]))
        let mixed = Data([0x40, 0x05, 0x42, 0x02, 0x06, 0x07, 0x4A, 0x01, 0x09])
        #expect(
            try pool.jsonString(fromBinary: mixed, messageName: "test.Sample") == #"{"packed":[5,6,7],"unpacked":[9]}"#)
    }

    @Test("maps: string, integer and bool keys, message values, sorted output, last key wins")
    func maps() throws {
        let pool = try Self.samplePool()
        let result = try Self.roundTrip(
            pool, #"{"counts": {"b": "2", "a": 1}, "children": {"-1": {"s32": 3}, "2": {}}, "flags": {"true": "yes"}}"#)
        #expect(
            result.json == #"{"counts":{"a":"1","b":"2"},"children":{"-1":{"s32":3},"2":{}},"flags":{"true":"yes"}}"#)
        // Two entries for key "a" in the binary: the later one wins.
        let twice = Data([0x52, 0x05, 0x0A, 0x01, 0x61, 0x10, 0x01, 0x52, 0x05, 0x0A, 0x01, 0x61, 0x10, 0x02])
        #expect(try pool.jsonString(fromBinary: twice, messageName: "test.Sample") == #"{"counts":{"a":"2"}}"#)
        // An entry without its value holds the default.
        #expect(
            try pool.jsonString(fromBinary: Data([0x52, 0x03, 0x0A, 0x01, 0x62]), messageName: "test.Sample")
                == #"{"counts":{"b":"0"}}"#)
        #expect(throws: DescriptorError.self) {
            try pool.binary(fromJSON: #"{"children": {"x": {}}}"#, messageName: "test.Sample")
        }
        #expect(throws: DescriptorError.self) {
            try pool.binary(fromJSON: #"{"flags": {"yes": "x"}}"#, messageName: "test.Sample")
        }
    }

    @Test("a singular message given twice in the binary is merged")
    func messageMerge() throws {
        let pool = try Self.samplePool()
        // child {s32: 1} then child {s64: 1}
        let binary = Data([0x7A, 0x02, 0x08, 0x02, 0x7A, 0x02, 0x10, 0x02])
        #expect(
            try pool.jsonString(fromBinary: binary, messageName: "test.Sample") == #"{"child":{"s32":1,"s64":"1"}}"#)
    }

    static func error(_ json: String, _ message: String = "mentory.v1.DiaryAddRequest", pool: DescriptorPool = pool)
        -> DescriptorError?
    {
        do {
            _ = try pool.binary(fromJSON: json, messageName: message)
            return nil
        } catch {
            return error
        }
    }

    @Test("an unknown field is named, with a suggestion and the known fields")
    func unknownField() throws {
        let error = try #require(Self.error(#"{"titel": "x"}"#))
        #expect(error.kind == .unknownField)
        #expect(
            error.message
                == "unknown field 'titel' in mentory.v1.DiaryAddRequest; did you mean 'title'? known fields: "
                + "recordDate, title, text, emotion, analysis, actionItems, id, createdAtUnixMs")
        let nested = try #require(Self.error(#"{"actionItems": [{"txt": "x"}]}"#))
        #expect(
            nested.message.hasPrefix(
                "unknown field 'actionItems[0].txt' in mentory.v1.ActionItem; did you mean 'text'?"))
    }

    @Test("values that do not fit their field name the field and what it accepts")
    func invalidValues() throws {
        let emotion = try #require(Self.error(#"{"emotion": "HAPPY"}"#))
        #expect(emotion.kind == .invalidValue)
        #expect(
            emotion.message
                == "field 'emotion' expects one of EMOTION_UNSPECIFIED, EMOTION_VERY_UNPLEASANT, EMOTION_UNPLEASANT, "
                + "EMOTION_SLIGHTLY_UNPLEASANT, EMOTION_NEUTRAL, EMOTION_SLIGHTLY_PLEASANT, EMOTION_PLEASANT, "
                + "EMOTION_VERY_PLEASANT, not 'HAPPY'")
        let cases: [(String, String, String)] = [
            (
                #"{"limit": -1}"#, "mentory.v1.DiaryListRequest",
                "field 'limit' expects an integer from 0 to 4294967295, not -1"
            ),
            (#"{"limit": 4294967296}"#, "mentory.v1.DiaryListRequest", "not 4294967296"),
            (#"{"limit": 1.5}"#, "mentory.v1.DiaryListRequest", "not 1.5"),
            (#"{"limit": "ten"}"#, "mentory.v1.DiaryListRequest", "not 'ten'"),
            (#"{"limit": " 1"}"#, "mentory.v1.DiaryListRequest", "not ' 1'"),
            (#"{"createdAtUnixMs": "9223372036854775808"}"#, "mentory.v1.DiaryAddRequest", "expects an integer"),
            (
                #"{"done": "yes"}"#, "mentory.v1.DiarySuggestionDoneRequest",
                "field 'done' expects true or false, not 'yes'"
            ),
            (#"{"title": 5}"#, "mentory.v1.DiaryAddRequest", "field 'title' expects a string, not 5"),
            (#"{"data": "***"}"#, "mentory.v1.StorageBackupReadReply", "expects a base64 string"),
            (
                #"{"actionItems": {}}"#, "mentory.v1.DiaryAddRequest",
                "field 'actionItems' expects a JSON array, not an object"
            ),
            (#"{"actionItems": [null]}"#, "mentory.v1.DiaryAddRequest", "field 'actionItems[0]' is null"),
            (
                #"{"actionItems": [{"done": 1}]}"#, "mentory.v1.DiaryAddRequest",
                "field 'actionItems[0].done' expects true or false"
            ),
            (
                #"[]"#, "mentory.v1.DiaryAddRequest",
                "the body expects a JSON object (mentory.v1.DiaryAddRequest), not an array"
            ),
            (#"{"uptimeSeconds": "fast"}"#, "mentory.v1.StatusReply", "field 'uptimeSeconds' expects a number"),
            (#"{"uptimeSeconds": 1e400}"#, "mentory.v1.StatusReply", "field 'uptimeSeconds' expects a number"),
            (#""x""#, "google.protobuf.UInt32Value", "field 'value' expects an integer from 0 to 4294967295, not 'x'"),
            (
                #"{"added": {}, "deletedId": "x"}"#, "mentory.v1.DiaryChange",
                "fields 'added' and 'deletedId' of mentory.v1.DiaryChange are both in oneof 'change'; give at most one"
            ),
            (
                #"{"recordDate": "a", "record_date": "b"}"#, "mentory.v1.DiaryAddRequest",
                "field 'record_date' of mentory.v1.DiaryAddRequest is given twice (as 'recordDate' and 'record_date')"
            ),
        ]
        for (json, message, expected) in cases {
            let error = try #require(Self.error(json, message), "\(json) is accepted")
            #expect(error.message.contains(expected), "\(json): \(error.message)")
            #expect(error.kind == .invalidValue, "\(json): \(error.kind)")
        }
        // A float out of its range, for the 32-bit type.
        let pool = try Self.samplePool()
        let float = try #require(Self.error(#"{"fl": 1e39}"#, "test.Sample", pool: pool))
        #expect(float.message.contains("32-bit"))
    }

    @Test("malformed JSON says where")
    func malformedJSON() throws {
        for json in [
            "{", #"{"a" 1}"#, "{\n  \"title\": tru\n}", #"{"a": 01}"#, #"{"a": "\x"}"#, "{} {}", #""\ud800""#, "",
        ] {
            let error = try #require(Self.error(json), "\(json) is accepted")
            #expect(error.kind == .malformedJSON, "\(json): \(error.message)")
        }
        #expect(Self.error("{\n  \"title\": tru\n}")?.message.hasPrefix("invalid JSON at line 2, column 12") == true)
    }

    @Test("nesting and size are bounded")
    func limits() throws {
        let deepJSON = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(Self.error(deepJSON)?.kind == .limitExceeded)
        let pool = try Self.samplePool()
        var nested = "{}"
        for _ in 0..<70 { nested = #"{"child": \#(nested)}"# }
        #expect(Self.error(nested, "test.Sample", pool: pool)?.kind == .limitExceeded)
        var shallow = "{}"
        for _ in 0..<60 { shallow = #"{"child": \#(shallow)}"# }
        #expect(Self.error(shallow, "test.Sample", pool: pool) == nil, "60 levels are within the default limit")

        // Binary nesting: DescriptorProto.nested_type is recursive.
        var descriptor = Google_Protobuf_DescriptorProto.with { $0.name = "leaf" }
        for _ in 0..<70 { descriptor = Google_Protobuf_DescriptorProto.with { $0.nestedType = [descriptor] } }
        #expect(throws: DescriptorError.self) {
            try Self.pool.jsonString(
                fromBinary: try descriptor.serializedBytes(), messageName: "google.protobuf.DescriptorProto")
        }
        let small = try Self.samplePool(limits: TranscodingLimits(maxBinaryBytes: 4, maxJSONBytes: 8))
        #expect(Self.error(#"{"s32": 1000}"#, "test.Sample", pool: small)?.kind == .limitExceeded)
        #expect(throws: DescriptorError.self) {
            try small.jsonString(fromBinary: Data(repeating: 0x08, count: 5), messageName: "test.Sample")
        }
    }

    @Test("malformed binary and unknown messages are refused")
    func malformedBinary() throws {
        let entry: Data = try TranscodingTests.entry.serializedBytes()
        for bytes in [
            entry.dropLast(1), Data([0x0A, 0x05, 0x61]), Data([0x08]), Data([0x00]), Data([0x0C]),
            Data([0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
            Data([0x0A, 0x02, 0xC3, 0x28]),  // a string that is not UTF-8
            Data([0x31, 1, 2, 3, 4, 5, 6, 7, 8]),  // field 6 (emotion) with the fixed64 wire type
        ] {
            #expect(throws: DescriptorError.self, "\(Array(bytes))") {
                try Self.pool.jsonString(fromBinary: Data(bytes), messageName: "mentory.v1.DiaryEntry")
            }
        }
        let unknown = try #require(Self.error("{}", "mentory.v1.Nope"))
        #expect(unknown.kind == .unknownMessage)
        #expect(unknown.message == "the descriptors define no message 'mentory.v1.Nope'")
    }

    @Test("descriptors naming an undefined type, or defining one twice, are refused")
    func invalidDescriptors() throws {
        let dangling = Google_Protobuf_FileDescriptorProto.with {
            $0.name = "bad.proto"
            $0.package = "bad"
            $0.messageType = [
                Google_Protobuf_DescriptorProto.with {
                    $0.name = "M"
                    $0.field = [
                        Google_Protobuf_FieldDescriptorProto.with {
                            $0.name = "x"
                            $0.number = 1
                            $0.type = .message
                            $0.typeName = ".bad.Missing"
                        }
                    ]
                }
            ]
        }
        #expect(
            throws: DescriptorError(
                .invalidDescriptors,
                "field bad.M.x has type .bad.Missing, which the descriptors do not define")
        ) {
            try DescriptorPool(files: [dangling])
        }
        var twice = dangling
        twice.name = "twice.proto"
        twice.messageType = [Google_Protobuf_DescriptorProto.with { $0.name = "M" }]
        var other = twice
        other.name = "other.proto"
        #expect(throws: DescriptorError.self) { try DescriptorPool(files: [twice, other]) }
        #expect(throws: Never.self) { try DescriptorPool(files: [twice, twice]) }
    }
}
