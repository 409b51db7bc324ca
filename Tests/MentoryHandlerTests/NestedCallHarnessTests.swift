import MentoryDomain
import MentoryHandlerKit
import MentoryHandlerTesting
import MentoryWire
import SwiftProtobuf
import Testing

/// A namespace whose method reads its caller's diary on the caller's behalf: what a plugin or handler author
/// writes, tested here without a daemon.
enum MoodCountSchema: NamespaceSchema {
    static let name = "moods"
    static let version: UInt32 = 1
    static let pleasant = MethodSchema<MoodCountSchema, Mentory_V1_Empty, Google_Protobuf_UInt32Value>(
        name: "pleasant")
    static let weather = MethodSchema<MoodCountSchema, Mentory_V1_Empty, Google_Protobuf_StringValue>(
        name: "weather")
    static let methods: [MethodInfo] = [pleasant.info, weather.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

/// Counts the caller's pleasant days through `diary.list`, and asks a `weather` namespace (a fake here).
struct MoodCountHandler: MentoryHandler {
    typealias Namespace = MoodCountSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.onAsync(Namespace.pleasant) { _, call, context in
            let list = try await context.call(MentoryDomainSchema.Diary.list, Mentory_V1_DiaryListRequest(), for: call)
            let pleasant = list.entries.filter { [.pleasant, .veryPleasant].contains($0.emotion) }
            return Google_Protobuf_UInt32Value(UInt32(pleasant.count))
        }
        routes.onAsync(Namespace.weather) { _, call, context in
            try await context.call(WeatherSchema.today, Mentory_V1_Empty(), for: call)
        }
    }
}

/// Another process's namespace in the daemon, faked for the test.
enum WeatherSchema: NamespaceSchema {
    static let name = "weather"
    static let version: UInt32 = 1
    static let today = MethodSchema<WeatherSchema, Mentory_V1_Empty, Google_Protobuf_StringValue>(name: "today")
    static let methods: [MethodInfo] = [today.info]
    static let topics: [TopicInfo] = []
    static var fileDescriptors: SchemaDescriptors { MentoryDomainSchema.fileDescriptors }
}

struct FakeWeather: MentoryHandler {
    typealias Namespace = WeatherSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.today) { _, _, _ in Google_Protobuf_StringValue("sunny") }
    }
}

@Suite("HandlerTestHarness: calls on the caller's behalf, without a daemon")
struct NestedCallHarnessTests {
    let alice = ConnectionContext.test(id: 7, credentials: PeerCredentials(pid: 10, uid: 1000, gid: 1000))
    let bob = ConnectionContext.test(id: 8, credentials: PeerCredentials(pid: 11, uid: 1001, gid: 1001))

    private func entry(_ day: String, _ emotion: Mentory_V1_Emotion) -> Mentory_V1_DiaryAddRequest {
        var request = Mentory_V1_DiaryAddRequest()
        request.recordDate = day
        request.emotion = emotion
        request.title = day
        request.text = "a day"
        return request
    }

    @Test("a method reads the caller's diary through the built-in diary, set up with callHosted")
    func readsTheDiary() async throws {
        let harness = try await HandlerTestHarness.open(MoodCountHandler(), accessRules: [])
        for (day, emotion) in [("2026-11-20", Mentory_V1_Emotion.pleasant), ("2026-11-21", .neutral)] {
            _ = try await harness.callHosted(MentoryDomainSchema.Diary.add, self.entry(day, emotion), from: self.alice)
        }
        let count = try await harness.call(MoodCountSchema.pleasant, Mentory_V1_Empty(), from: self.alice)
        #expect(count.value == 1)
        await harness.close()
    }

    @Test("a caller the access rules deny the diary is refused, and the refusal names diary.list")
    func refusedOnTheCallersBehalf() async throws {
        let harness = try await HandlerTestHarness.open(MoodCountHandler(), accessRules: ["deny uid=1000 diary.*"])
        _ = try await harness.callHosted(
            MentoryDomainSchema.Diary.add, self.entry("2026-11-20", .pleasant), from: self.bob)
        let refusal = await #expect(
            throws: MentoryError.deniedOnBehalf(namespace: "diary", method: "list", chain: ["moods"])
        ) {
            try await harness.call(MoodCountSchema.pleasant, Mentory_V1_Empty(), from: self.alice)
        }
        #expect(refusal?.code == .permissionDenied)
        #expect(refusal?.reason == MentoryError.Reason.deniedOnBehalf)
        #expect(refusal?.message.contains("on your behalf by moods") == true, "\(refusal?.message ?? "")")
        let failure = await #expect(throws: HostedCallFailure.self) {
            try await harness.callHosted(
                MentoryDomainSchema.Diary.list, Mentory_V1_DiaryListRequest(), from: self.alice)
        }
        #expect(failure?.code == UInt32(Mentory_V1_ErrorCode.permissionDenied.rawValue))
        #expect(try await harness.call(MoodCountSchema.pleasant, Mentory_V1_Empty(), from: self.bob).value == 1)
        await harness.close()
    }

    @Test("a fake stands in for another namespace; an unserved one fails as in the daemon")
    func fakes() async throws {
        let harness = try await HandlerTestHarness.open(MoodCountHandler(), accessRules: [])
        await #expect(throws: MentoryError.self) {
            try await harness.call(MoodCountSchema.weather, Mentory_V1_Empty(), from: self.alice)
        }
        try await harness.register(FakeWeather())
        #expect(try await harness.call(MoodCountSchema.weather, Mentory_V1_Empty(), from: self.alice).value == "sunny")
        await harness.close()
    }
}
