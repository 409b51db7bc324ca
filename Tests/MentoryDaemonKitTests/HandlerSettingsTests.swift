import Configuration
import Testing

@testable import MentoryDaemonKit

@Suite("What handlers read of the daemon's settings")
struct HandlerSettingsTests {
    @Test("the instance, state directory, frame limit, reply budget, timeout and log level, as configured")
    func fromSettings() throws {
        let settings = try DaemonSettings(
            config: ConfigReader(
                provider: InMemoryProvider(values: [
                    "state.directory": "/var/lib/mentoryd", "limits.maxFrameLength": 524_288,
                    "limits.requestTimeoutMilliseconds": 2_500, "log.level": "debug",
                ])),
            environment: [:])
        let seen = settings.handlerSettings(
            instance: DaemonInstance(kind: .system, uid: 998, userName: DaemonInstance.systemAccount))
        #expect(seen.instanceKind == .system)
        #expect(seen.daemonUID == 998)
        #expect(seen.stateDirectory == "/var/lib/mentoryd")
        #expect(seen.maxFrameLength == 524_288)
        #expect(seen.maxReplyBytes > 0 && seen.maxReplyBytes < 524_288)
        #expect(seen.requestTimeout == .milliseconds(2_500))
        #expect(seen.logLevel == .debug)
        let user = settings.handlerSettings(instance: DaemonInstance(kind: .user, uid: 1000, userName: "ana"))
        #expect(user.instanceKind == .user)
    }
}
