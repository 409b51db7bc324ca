import MentoryEngine
import Testing

@testable import MentoryDaemonKit

@Suite("Plugins sections on reload")
struct PluginReloadTests {
    static let builtIns = ["mentor", "reachability", "diary", "daemon"]

    @Test("plugins a reload declares pass the checks start-up makes")
    func accepted() {
        let plugins = [
            PluginDeclaration(name: "advisor", namespace: "advisor", requires: ["diary"]),
            PluginDeclaration(name: "streaks", namespace: "streaks", requires: ["advisor", "session"]),
        ]
        #expect(Daemon.problem(declaring: plugins, besides: Self.builtIns) == nil)
        #expect(Daemon.problem(declaring: [], besides: Self.builtIns) == nil)
    }

    @Test("a built-in's namespace, a requirement nothing serves, or a cycle keeps the plugins declared before")
    func refused() throws {
        let taken = try #require(
            Daemon.problem(declaring: [PluginDeclaration(name: "x", namespace: "diary")], besides: Self.builtIns))
        #expect(taken.contains("plugins.x.namespace"), "\(taken)")
        let session = try #require(
            Daemon.problem(declaring: [PluginDeclaration(name: "s", namespace: "session")], besides: Self.builtIns))
        #expect(session.contains("plugins.s.namespace"), "\(session)")
        let missing = try #require(
            Daemon.problem(
                declaring: [PluginDeclaration(name: "a", namespace: "a", requires: ["oracle"])], besides: Self.builtIns)
        )
        #expect(missing.contains("oracle"), "\(missing)")
        let cycle = try #require(
            Daemon.problem(
                declaring: [
                    PluginDeclaration(name: "a", namespace: "a", requires: ["b"]),
                    PluginDeclaration(name: "b", namespace: "b", requires: ["a"]),
                ], besides: Self.builtIns))
        #expect(cycle.contains("a -> b -> a") || cycle.contains("b -> a -> b"), "\(cycle)")
    }
}
