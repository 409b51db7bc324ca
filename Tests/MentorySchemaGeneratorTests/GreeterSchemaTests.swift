import MentoryWire
import SwiftProtobuf
import Testing

/// greeter.proto's generated schema (Generated/greeter.schema.swift) compiles outside MentoryWire and
/// describes the file's namespaces.
@Suite("A third-party namespace's generated schema")
struct GreeterSchemaTests {
    @Test("methods and topics carry their names and message types")
    func typed() {
        #expect(GreeterSchema.Greeter.name == "greeter")
        #expect(GreeterSchema.Greeter.version == 2)
        #expect(GreeterSchema.Greeter.hello.namespace == "greeter")
        #expect(
            GreeterSchema.Greeter.hello.info
                == MethodInfo(name: "hello", request: "greeter.v1.HelloRequest", reply: "greeter.v1.HelloReply")
        )
        #expect(
            GreeterSchema.Greeter.default.info
                == MethodInfo(name: "default", request: "mentory.v1.Empty", reply: "google.protobuf.StringValue")
        )
        #expect(GreeterSchema.Greeter.count.info.reply == Greeter_V1_Greeting.Counts.protoMessageName)
        #expect(
            GreeterSchema.Greeter.greetingsTopic.info
                == TopicInfo(
                    name: "greetings", change: "greeter.v1.Greeting", snapshot: "greeter.v1.Greeting.Counts",
                    reads: ["greeter.hello"])
        )
        #expect(GreeterSchema.Greeter.greeterStatusTopic.name == "greeter.status")
        #expect(GreeterSchema.Greeter.greeterStatusTopic.reads.isEmpty, "a topic declaring no reads is privileged")
        #expect(GreeterSchema.Greeter.methods.map(\.name) == ["hello", "default", "count"])
        #expect(GreeterSchema.Farewell.topics.isEmpty)
        #expect(GreeterSchema.namespaces.map(\.name) == ["greeter", "farewell"])
    }

    @Test("the embedded descriptors hold greeter.proto after every file it imports")
    func descriptors() {
        let names = GreeterSchema.fileDescriptors.files.map(\.name)
        #expect(
            names == [
                "google/protobuf/descriptor.proto", "google/protobuf/wrappers.proto", "mentory.proto", "greeter.proto",
            ]
        )
        // mentory.proto and its imports are MentoryWire's own set, referred to rather than embedded again.
        #expect(
            GreeterSchema.fileDescriptors.base64Files.dropLast() == MentorySchema.fileDescriptors.base64Files[...])
        #expect(GreeterSchema.Farewell.fileDescriptors.base64Files == GreeterSchema.fileDescriptors.base64Files)
        // Merged with MentoryWire's own set, each file appears once.
        let merged = SchemaDescriptors.merged([MentorySchema.fileDescriptors, GreeterSchema.fileDescriptors])
        #expect(merged.file.map(\.name).sorted() == names.sorted())
    }

    @Test("typed values build and round-trip through their messages")
    func messages() throws {
        func roundTrip<N, Request, Reply>(_ method: MethodSchema<N, Request, Reply>, _ request: Request) throws
            -> Request
        {
            try Request(serializedBytes: try request.serializedBytes() as [UInt8])
        }
        var request = Greeter_V1_HelloRequest()
        request.name = "Ada"
        #expect(try roundTrip(GreeterSchema.Greeter.hello, request) == request)
    }
}
