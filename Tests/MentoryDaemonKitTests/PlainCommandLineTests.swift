import Testing

@testable import MentoryDaemonKit

@Suite("mentoryd's command line read without the argument parser")
struct PlainCommandLineTests {
    @Test(
        "a command line of plain options reads as the parser reads it",
        arguments: [
            [],
            ["--socket", "/run/m.sock"],
            ["--socket=/run/m.sock", "--state-dir", "/var/lib/m"],
            ["--state-dir=/var/lib/a=b", "--log-level", "warning", "--socket", "/tmp/s"],
            ["--config", "/etc/m.json", "--max-frame-length", "65536"],
            ["--max-frame-length=1024", "--log-level=debug", "--config=/c.json", "--state-dir", "s", "--socket", "x"],
        ]
    )
    func sameAsParser(arguments: [String]) throws {
        let plain = try #require(MentorydCommand.plain(arguments))
        let parsed = try MentorydCommand.parse(arguments)
        #expect(plain == parsed.options)
    }

    @Test(
        "anything else is left to the parser",
        arguments: [
            ["--help"],
            ["--version"],
            ["--socket"],
            ["--socket="],
            ["--socket", "--state-dir", "/x"],
            ["--socket", "/a", "--socket", "/b"],
            ["--socket=/a", "--socket", "/b"],
            ["--max-frame-length", "big"],
            ["--max-frame-length", "-1"],
            ["--log-level", "info", "extra"],
            ["--", "--socket", "/a"],
            ["-h"],
            ["--unknown", "value"],
        ]
    )
    func leftToParser(arguments: [String]) {
        #expect(MentorydCommand.plain(arguments) == nil)
    }
}
