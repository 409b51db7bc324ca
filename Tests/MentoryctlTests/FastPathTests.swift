import ArgumentParser
import Testing

@testable import mentoryctl

@Suite("mentoryctl's plainest command lines, run without the argument parser")
struct FastPathTests {
    /// The settings the parser gives the command `arguments` name, and that command's path.
    private func parsed(_ arguments: [String]) throws -> (path: [String], settings: PlainClientSettings) {
        let command = try Mentoryctl.parseAsRoot(arguments)
        let options: ClientOptions
        let path: [String]
        switch command {
        case let command as Ping: (options, path) = (command.options, ["ping"])
        case let command as Status: (options, path) = (command.options, ["status"])
        case let command as MentorCommand.Get: (options, path) = (command.options, ["mentor", "get"])
        case let command as ReachabilityCommand.Get: (options, path) = (command.options, ["reachability", "get"])
        default:
            Issue.record("\(arguments) parsed as \(type(of: command)), which the fast path does not run")
            return ([], PlainClientSettings())
        }
        return (path, PlainClientSettings(socket: options.socket, json: options.json, timeout: options.timeout))
    }

    @Test(
        "a plain command line runs the command the parser would, with the same options",
        arguments: [
            ["ping"],
            ["status", "--json"],
            ["--json", "status"],
            ["--socket", "/run/m.sock", "mentor", "get"],
            ["mentor", "--socket=/run/m.sock", "get", "--timeout", "2.5"],
            ["--timeout=0.25", "reachability", "get", "--json", "--socket", "/tmp/a=b"],
        ]
    )
    func sameAsParser(arguments: [String]) throws {
        let (_, fast) = try #require(FastPath.match(arguments))
        let reading = try #require(FastPath.globalOptions.read(arguments))
        let parsed = try self.parsed(arguments)
        #expect(parsed.path == reading.operands)
        #expect(fast.socket == parsed.settings.socket)
        #expect(fast.json == parsed.settings.json)
        #expect(fast.timeout == parsed.settings.timeout)
    }

    @Test(
        "anything else is left to the parser",
        arguments: [
            [],
            ["--help"],
            ["ping", "--help"],
            ["diary", "list"],
            ["mentor", "set", "--content", "x", "--character", "cool"],
            ["ping", "extra"],
            ["mentor"],
            ["ping", "--timeout", "soon"],
            ["ping", "--json", "--json"],
            ["ping", "--", "--json"],
            ["ping", "--socket"],
        ]
    )
    func leftToParser(arguments: [String]) {
        #expect(FastPath.match(arguments) == nil)
    }

    @Test("the global options are read before and after the subcommand alike")
    func globalOptionsAnywhere() throws {
        let before = try self.parsed(["--json", "--socket", "/s", "--timeout", "3", "ping"])
        let after = try self.parsed(["ping", "--json", "--socket", "/s", "--timeout", "3"])
        #expect(before.path == after.path)
        #expect(before.settings.socket == "/s" && after.settings.socket == "/s")
        #expect(before.settings.json && after.settings.json)
        #expect(before.settings.timeout == 3 && after.settings.timeout == 3)
    }

    @Test("a nested subcommand reads the global options written before its parent")
    func nestedSubcommandReadsRootOptions() throws {
        let command = try Mentoryctl.parseAsRoot(["--socket", "/s", "diary", "list", "--json", "--limit", "5"])
        let list = try #require(command as? DiaryCommand.List)
        #expect(list.options.socket == "/s")
        #expect(list.options.json)
    }
}
