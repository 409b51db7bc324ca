import MentoryCommandLine
import Testing

@Suite("Command lines in their plainest form")
struct PlainCommandLineTests {
    let reader = PlainCommandLine(options: [.valued("--socket"), .valued("--timeout"), .flag("--json")])

    @Test("options in every plain spelling, and operands around them, are read")
    func readsPlainForms() throws {
        let reading = try #require(
            self.reader.read(["diary", "--socket", "/run/m.sock", "list", "--json", "--timeout=2.5"])
        )
        #expect(reading.operands == ["diary", "list"])
        #expect(reading["--socket"] == "/run/m.sock")
        #expect(reading["--timeout"] == "2.5")
        #expect(reading.isSet("--json"))
        #expect(reading.values.count == 3)
    }

    @Test("a value keeps every = after the first")
    func valueWithEquals() throws {
        let reading = try #require(self.reader.read(["--socket=/tmp/a=b"]))
        #expect(reading["--socket"] == "/tmp/a=b")
        #expect(reading.operands.isEmpty)
    }

    @Test("an empty command line reads as nothing given")
    func empty() throws {
        let reading = try #require(self.reader.read([String]()))
        #expect(reading == PlainCommandLine.Reading())
        #expect(!reading.isSet("--json"))
        #expect(reading["--socket"] == nil)
    }

    @Test(
        "anything but the plain form is refused, for the parser to judge",
        arguments: [
            ["--help"],
            ["-h"],
            ["--"],
            ["ping", "--", "--json"],
            ["--socket"],
            ["--socket="],
            ["--socket", "--json"],
            ["--socket", "-"],
            ["--timeout=-1"],
            ["--socket", "/a", "--socket", "/b"],
            ["--socket=/a", "--socket", "/b"],
            ["--json", "--json"],
            ["--json=yes"],
            ["--unknown"],
            ["--unknown", "value"],
            ["--sock", "/a"],
        ]
    )
    func refused(arguments: [String]) {
        #expect(self.reader.read(arguments) == nil)
    }
}
