import Configuration
import MentoryStorageSQLite
import Testing

@testable import MentoryDaemonKit

@Suite("The storage settings: write-ahead log limits")
struct StorageSettingsTests {
    private func settings(_ values: [AbsoluteConfigKey: ConfigValue]) throws(SettingsError) -> DaemonSettings {
        try DaemonSettings(config: ConfigReader(provider: InMemoryProvider(values: values)), environment: [:])
    }

    @Test("without the keys, the store's own defaults apply")
    func defaults() throws {
        let settings = try self.settings([:])
        let store = SQLiteSessionStore.Configuration(path: "")
        #expect(settings.checkpointPages == store.checkpointPages)
        #expect(settings.maxLogPages == store.maxLogPages)
    }

    @Test("storage.checkpointPages and storage.maxLogPages are read, and need a restart to change")
    func read() throws {
        let settings = try self.settings(["storage.checkpointPages": 200, "storage.maxLogPages": 800])
        #expect(settings.checkpointPages == 200)
        #expect(settings.maxLogPages == 800)
        let defaults = try self.settings([:])
        #expect(
            DaemonSettings.changedNeedingRestart(defaults, settings) == [
                "storage.checkpointPages", "storage.maxLogPages",
            ])
    }

    @Test(
        "a limit that is not positive, or a log limit under the checkpoint threshold, is refused by name",
        arguments: [
            (["storage.checkpointPages": 0] as [AbsoluteConfigKey: ConfigValue], "storage.checkpointPages"),
            (["storage.maxLogPages": -1], "storage.maxLogPages"),
            (["storage.checkpointPages": 500, "storage.maxLogPages": 100], "storage.maxLogPages"),
        ]
    )
    func refused(values: [AbsoluteConfigKey: ConfigValue], key: String) {
        #expect {
            try self.settings(values)
        } throws: { error in
            guard case SettingsError.invalid(let refusedKey, _) = error else { return false }
            return refusedKey == key
        }
    }
}
