import Configuration
import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOConcurrencyHelpers
import NIOPosix
import SwiftProtobuf
import Testing

/// `settings.read` answers what the handler sees of the daemon's settings; `settings.count` counts calls
/// in the handler's state.
enum SettingsSchema: NamespaceSchema {
    static let name = "settings"
    static let version: UInt32 = 1
    static let read = MethodSchema<SettingsSchema, Mentory_V1_Empty, Google_Protobuf_StringValue>(name: "read")
    static let count = MethodSchema<SettingsSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "count")
    static let methods: [MethodInfo] = [read.info, count.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentorySchema.fileDescriptors }
}

/// What the settings handler saw outside its calls: at open, at each reload, and the state it closed.
final class SettingsSightings: Sendable {
    let seen = NIOLockedValueBox<[String]>([])
    let closedWithCount = NIOLockedValueBox<Int?>(nil)

    func record(_ line: String) { self.seen.withLockedValue { $0.append(line) } }
}

struct SettingsHandler: MentoryHandler {
    typealias Namespace = SettingsSchema
    let sightings: SettingsSightings

    /// A resource acquired at open that close must release, and the calls counted since.
    final class State {
        var calls = 0
        var released = false
    }

    static func describe(_ settings: GlobalSettings) -> String {
        "\(settings.instanceKind.rawValue) uid=\(settings.daemonUID) dir=\(settings.stateDirectory)"
            + " frame=\(settings.maxFrameLength) reply=\(settings.maxReplyBytes) level=\(settings.logLevel)"
    }

    func open(_ setup: HandlerSetup) async throws -> sending State {
        self.sightings.record("open " + Self.describe(setup.settings))
        return State()
    }

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.read) { _, _, context in
            Google_Protobuf_StringValue(Self.describe(context.settings))
        }
        routes.on(Namespace.count) { _, _, context in
            context.state.calls += 1
            return Mentory_V1_Empty()
        }
    }

    func reload(context: HandlerContext<Self>) throws {
        self.sightings.record("reload " + Self.describe(context.settings))
    }

    func close(_ state: consuming State, setup: HandlerSetup) async {
        state.released = true
        self.sightings.closedWithCount.withLockedValue { $0 = state.calls }
        self.sightings.record("close " + Self.describe(setup.settings))
    }
}

@Suite("A handler's lifecycle: the settings it reads and the state close releases")
struct HandlerLifecycleTests {
    static let settings = GlobalSettings(
        instanceKind: .system, daemonUID: 998, stateDirectory: "/var/lib/mentoryd", maxFrameLength: 65_536,
        maxReplyBytes: 65_000, requestTimeout: .seconds(5), logLevel: .info)

    @Test("open, calls and reload see the daemon's settings; a reload refreshes them; close gets the state")
    func engine() async throws {
        let sightings = SettingsSightings()
        let engine = MentoryEngine(
            configuration: .init(serverVersion: "test", daemonUID: nil, handlerSettings: Self.settings),
            executor: EngineTestLoops.group.next().executor)
        try await engine.register(SettingsHandler(sightings: sightings))
        let id = ConnectionID(1)
        _ = await engine.attach(ConnectionContext(id: id, clientName: "t", credentials: nil), sink: RecordingSink())

        func read() async throws -> String {
            var request = Mentory_V1_Request()
            request.id = 1
            request.namespace = "settings"
            request.method = "read"
            let response = await engine.respond(to: request, from: id)
            return try Google_Protobuf_StringValue(serializedBytes: response.body).value
        }
        func count() async {
            var request = Mentory_V1_Request()
            request.id = 2
            request.namespace = "settings"
            request.method = "count"
            _ = await engine.respond(to: request, from: id)
        }

        let described = SettingsHandler.describe(Self.settings)
        #expect(try await read() == described)
        await count()
        await count()

        var reloaded = Self.settings
        reloaded.logLevel = .debug
        let refused = await engine.reloadHandlers(settings: reloaded) { _ in
            ConfigReader(provider: InMemoryProvider(values: [:]))
        }
        #expect(refused.isEmpty)
        #expect(try await read() == SettingsHandler.describe(reloaded))

        await engine.closeHandlers()
        #expect(
            sightings.seen.withLockedValue { $0 } == [
                "open " + described, "reload " + SettingsHandler.describe(reloaded),
                "close " + SettingsHandler.describe(reloaded),
            ])
        #expect(sightings.closedWithCount.withLockedValue { $0 } == 2, "close got the state as the calls left it")
    }
}
