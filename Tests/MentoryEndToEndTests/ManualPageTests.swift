import Foundation
import MentoryTestSupport
import Testing

/// The committed man pages (docs/man, made by scripts/generate-manuals.sh) against the commands'
/// own help: a command or option added without regenerating the pages fails here.
@Suite("Man pages")
struct ManualPageTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test(
        "every command and long option of the binary is in its man page",
        arguments: [("mentoryctl", "docs/man/mentoryctl.1"), ("mentoryd", "docs/man/mentoryd.8")]
    )
    func manualCoversHelp(binary: String, page: String) async throws {
        let help = try await CommandResult.run(
            DaemonProcess.binary(binary), ["--experimental-dump-help"], environment: [:])
        #expect(help.status == 0)
        let info = try #require(
            try JSONSerialization.jsonObject(with: Data(help.stdout.utf8)) as? [String: Any])
        let root = try #require(info["command"] as? [String: Any])
        let manual = try String(contentsOf: Self.repository.appendingPathComponent(page), encoding: .utf8)

        var commands: [String] = []
        var options: Set<String> = []
        Self.collect(root, isRoot: true, commands: &commands, options: &options)
        #expect(!options.isEmpty, "the help lists options")
        for command in commands where command != "help" {
            #expect(
                manual.contains(".It Em \(command)\n"),
                "\(page) lacks the command '\(command)'; run scripts/generate-manuals.sh")
        }
        for option in options.sorted() {
            #expect(
                manual.contains("Fl -\(option)"),
                "\(page) lacks the option --\(option); run scripts/generate-manuals.sh")
        }
    }

    private static func collect(
        _ command: [String: Any], isRoot: Bool, commands: inout [String], options: inout Set<String>
    ) {
        if !isRoot, let name = command["commandName"] as? String { commands.append(name) }
        for argument in command["arguments"] as? [[String: Any]] ?? [] where argument["shouldDisplay"] as? Bool != false
        {
            for name in argument["names"] as? [[String: Any]] ?? [] where name["kind"] as? String == "long" {
                if let long = name["name"] as? String { options.insert(long) }
            }
        }
        for subcommand in command["subcommands"] as? [[String: Any]] ?? [] {
            Self.collect(subcommand, isRoot: false, commands: &commands, options: &options)
        }
    }
}
