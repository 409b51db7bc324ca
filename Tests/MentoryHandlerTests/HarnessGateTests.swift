import MentoryDomain
import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryWire
import SwiftProtobuf
import Testing

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A namespace with an owner-only method and a topic that declares no reads, to see the harness apply the
/// daemon's gate to the handler under test itself.
enum VaultSchema: NamespaceSchema {
    static let name = "vault"
    static let version: UInt32 = 1
    static let open = MethodSchema<VaultSchema, Mentory_V1_Empty, Google_Protobuf_StringValue>(name: "open")
    static let wipe = MethodSchema<VaultSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "wipe", privilege: .owner)
    static let fail = MethodSchema<VaultSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "fail")
    static let opened = TopicSchema<VaultSchema, Google_Protobuf_StringValue, Google_Protobuf_StringValue>(
        name: "vault.opened")
    static let methods: [MethodInfo] = [open.info, wipe.info, fail.info]
    static let topics: [TopicInfo] = [opened.info]
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// The handler's own error, which the harness must throw as it was thrown.
struct VaultError: HandlerError, Equatable {
    var code: Mentory_V1_ErrorCode { .conflict }
    var reason: String { "sealed" }
    var message: String { "the vault is sealed" }
}

struct VaultHandler: MentoryHandler {
    typealias Namespace = VaultSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.open) { _, call, context in
            let who = Google_Protobuf_StringValue("opened by \(call.connection.credentials?.uid ?? 0)")
            context.publish(who, on: Namespace.opened)
            return who
        }
        routes.on(Namespace.wipe) { _, _, _ in Mentory_V1_Empty() }
        routes.onAsync(Namespace.fail) { _, _, _ in throw VaultError() }
        routes.snapshot(Namespace.opened) { _ in Google_Protobuf_StringValue("closed") }
    }
}

@Suite("HandlerTestHarness: the handler under test behind the daemon's gate")
struct HarnessGateTests {
    let alice = ConnectionContext.test(id: 7, credentials: PeerCredentials(pid: 10, uid: 1000, gid: 1000))

    @Test("a privileged method is refused to a caller without the privilege, as the daemon refuses it")
    func privilege() async throws {
        let harness = try await HandlerTestHarness.open(VaultHandler())
        _ = try await harness.call(VaultSchema.wipe, Mentory_V1_Empty())
        await #expect(throws: MentoryError.permissionDenied(namespace: "vault", method: "wipe")) {
            try await harness.call(VaultSchema.wipe, Mentory_V1_Empty(), from: self.alice)
        }
        await harness.close()
    }

    @Test("the access rules given to the harness decide calls to the handler under test too")
    func rules() async throws {
        let harness = try await HandlerTestHarness.open(VaultHandler(), accessRules: ["deny uid=1000 vault.open"])
        await #expect(throws: MentoryError.permissionDenied(namespace: "vault", method: "open")) {
            try await harness.call(VaultSchema.open, Mentory_V1_Empty(), from: self.alice)
        }
        #expect(try await harness.call(VaultSchema.open, Mentory_V1_Empty()).value == "opened by 0")
        #expect(try await harness.published(on: VaultSchema.opened).map(\.value) == ["opened by 0"])
        await harness.close()
    }

    @Test("a handler's own error is thrown as it threw it; an undeclared method fails as in the daemon")
    func errors() async throws {
        let harness = try await HandlerTestHarness.open(VaultHandler())
        await #expect(throws: VaultError()) { try await harness.call(VaultSchema.fail, Mentory_V1_Empty()) }
        await #expect(throws: MentoryError.self) { try await harness.callRaw("nope", body: Data()) }
        await harness.close()
        await #expect(throws: MentoryError.shuttingDown) {
            try await harness.call(VaultSchema.open, Mentory_V1_Empty())
        }
    }

    @Test("a snapshot is taken through the topic's gate, and the gate's routes say which methods are answered at once")
    func snapshot() async throws {
        let harness = try await HandlerTestHarness.open(VaultHandler())
        #expect(try await harness.snapshot(of: VaultSchema.opened).value == "closed")
        #expect(try await harness.answersImmediately(VaultSchema.open, Mentory_V1_Empty()))
        #expect(try await !harness.answersImmediately(VaultSchema.fail, Mentory_V1_Empty()))
        await harness.close()
    }
}
