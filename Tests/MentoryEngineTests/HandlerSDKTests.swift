import Configuration
import MentoryDomain
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOPosix
import SwiftProtobuf
import Testing

/// A namespace declared for these tests only: what protoc-gen-mentory generates from a `service`.
enum EchoSchema: NamespaceSchema {
    static let name = "echo"
    static let version: UInt32 = 3
    static let echo = MethodSchema<EchoSchema, Mentory_V1_ActionItem, Mentory_V1_ActionItem>(name: "echo")
    static let fail = MethodSchema<EchoSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "fail")
    static let crash = MethodSchema<EchoSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "crash")
    static let slow = MethodSchema<EchoSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "slow")
    static let echoesTopic = TopicSchema<EchoSchema, Mentory_V1_ActionItem, Mentory_V1_ActionItem>(
        name: "echoes", reads: ["echo.echo"])
    static let methods: [MethodInfo] = [echo.info, fail.info, crash.info, slow.info]
    static let topics: [TopicInfo] = [echoesTopic.info]
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// A failure with the handler's own stable code and its cause kept.
struct EchoRefused: HandlerError {
    var code: Mentory_V1_ErrorCode { .conflict }
    var reason: String { "echo_refused" }
    var message: String { "the echo was refused; try another text" }
    var underlyingError: (any Error)? { CancellationError() }
}

struct Unexpected: Error {}

/// A test-only handler: one file, one schema, and nothing else edited to serve it.
struct EchoHandler: MentoryHandler {
    typealias Namespace = EchoSchema

    final class State {
        var last = Mentory_V1_ActionItem()
        var prefix: String
        init(prefix: String) { self.prefix = prefix }
    }

    func open(_ setup: HandlerSetup) async throws -> sending State {
        State(prefix: setup.config.string(forKey: "prefix", default: ""))
    }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.echo) { request, call, context in
            var echoed = request
            echoed.text = context.state.prefix + request.text
            echoed.id = "\(call.requestID)"
            context.state.last = echoed
            context.publish(echoed, on: Namespace.echoesTopic)
            return echoed
        }
        routes.on(Namespace.fail) { _, _, _ in throw EchoRefused() }
        routes.onAsync(Namespace.crash) { _, _, _ in
            await Task.yield()
            throw Unexpected()
        }
        routes.onAsync(Namespace.slow) { request, call, _ in
            // Work that checks its deadline between steps.
            while true {
                try call.checkCancellation()
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        routes.snapshot(Namespace.echoesTopic) { context in context.state.last }
    }

    func reload(context: HandlerContext<Self>) throws {
        context.state.prefix = context.config.string(forKey: "prefix", default: "")
    }
}

/// A handler whose routes leave one of its methods unanswered.
struct IncompleteHandler: MentoryHandler {
    typealias Namespace = EchoSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.echo) { request, _, _ in request }
    }
}

@Suite("Handler SDK hosted by the engine")
struct HandlerSDKTests {
    private func fixture(prefix: String = "") async throws -> EngineFixture {
        let fixture = try await EngineFixture()
        let config = ConfigReader(
            provider: InMemoryProvider(values: ["prefix": .init(.string(prefix), isSecret: false)]))
        try await fixture.engine.register(EchoHandler(), config: config)
        return fixture
    }

    @Test("a test-only handler is described, called and watched with no other edit")
    func describedCalledWatched() async throws {
        let fixture = try await self.fixture(prefix: "> ")
        let (client, sink) = await fixture.connect()

        var request = Mentory_V1_DescribeRequest()
        request.namespace = "echo"
        let description = try await fixture.call(
            "session", "describe", request, from: client, as: Mentory_V1_DescribeReply.self)
        #expect(description.namespaces.count == 1)
        let echo = try #require(description.namespaces.first)
        #expect(echo.version == 3)
        #expect(echo.methods.map(\.name) == ["echo", "fail", "crash", "slow"])
        #expect(echo.methods.first?.request == "mentory.v1.ActionItem")
        #expect(echo.topics.map(\.name) == ["echoes"])
        #expect(description.descriptors.file.contains { $0.name == "mentory.proto" })

        _ = try await fixture.subscribe(client, to: ["echoes"])
        #expect(try #require(await sink.next().first).kind == .snapshot)
        var item = Mentory_V1_ActionItem()
        item.text = "hello"
        let reply = try await fixture.call("echo", "echo", item, from: client, as: Mentory_V1_ActionItem.self)
        #expect(reply.text == "> hello")
        let event = try #require(await sink.next().first)
        #expect(event.kind == .change)
        #expect(try Mentory_V1_ActionItem(serializedBytes: event.body) == reply)
    }

    @Test("describe with no namespace lists session and every handler; an unknown one is UNKNOWN_NAMESPACE")
    func describeAll() async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect()
        let all = try await fixture.call(
            "session", "describe", Mentory_V1_DescribeRequest(), from: client, as: Mentory_V1_DescribeReply.self)
        #expect(all.namespaces.map(\.namespace) == ["session", "plugin", "mentor", "reachability", "diary", "echo"])
        #expect(all.namespaces.first?.methods.map(\.name) == MentorySchema.Session.methods.map(\.name))
        var missing = Mentory_V1_DescribeRequest()
        missing.namespace = "nope"
        #expect(try await fixture.failure("session", "describe", missing, from: client) == .unknownNamespace)
    }

    @Test("a handler's own error keeps its wire code and travels with a namespaced reason")
    func handlerError() async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect()
        let response = try await fixture.send("echo", "fail", Mentory_V1_Empty(), from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.conflict.rawValue))
        #expect(response.error.reason == "echo.echo_refused")
        #expect(response.error.message == "the echo was refused; try another text")
    }

    @Test("any other error is INTERNAL, names the method, and the next call still works")
    func unexpectedError() async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect()
        let response = try await fixture.send("echo", "crash", Mentory_V1_Empty(), from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.internal.rawValue))
        #expect(response.error.message.contains("echo.crash"))
        #expect(try await fixture.failure("echo", "nope", Mentory_V1_Empty(), from: client) == .unknownMethod)
        _ = try await fixture.call(
            "echo", "echo", Mentory_V1_ActionItem(), from: client, as: Mentory_V1_ActionItem.self)
    }

    @Test("a reload hands the handler its new section")
    func reload() async throws {
        let fixture = try await self.fixture(prefix: "a:")
        let (client, _) = await fixture.connect()
        let refused = await fixture.engine.reloadHandlers { namespace in
            ConfigReader(
                provider: InMemoryProvider(values: ["prefix": .init(.string("\(namespace):"), isSecret: false)]))
        }
        #expect(refused.isEmpty)
        let reply = try await fixture.call(
            "echo", "echo", Mentory_V1_ActionItem(), from: client, as: Mentory_V1_ActionItem.self)
        #expect(reply.text == "echo:")
    }

    @Test("a handler whose routes miss a declared method or topic is refused at registration, by name")
    func incomplete() async throws {
        let fixture = try await EngineFixture()
        await #expect {
            try await fixture.engine.register(IncompleteHandler())
        } throws: { error in
            let message = "\(error)"
            return message.contains("method 'fail' has no route") && message.contains("method 'crash' has no route")
                && message.contains("topic 'echoes' has no snapshot")
        }
        let (client, _) = await fixture.connect()
        #expect(try await fixture.failure("echo", "echo", Mentory_V1_ActionItem(), from: client) == .unknownNamespace)
    }

    @Test("a handler that checks its deadline ends with DEADLINE_EXCEEDED naming the request's timeout_ms")
    func deadline() async throws {
        let fixture = try await self.fixture()
        let (client, _) = await fixture.connect()
        var request = Mentory_V1_Request()
        request.id = 9
        request.namespace = "echo"
        request.method = "slow"
        request.timeoutMs = 50
        let response = await fixture.engine.respond(to: request, from: client)
        #expect(response.error.code == UInt32(Mentory_V1_ErrorCode.deadlineExceeded.rawValue))
        #expect(response.error.message.contains("echo.slow"))
        #expect(response.error.message.contains("50 ms"))
    }
}
