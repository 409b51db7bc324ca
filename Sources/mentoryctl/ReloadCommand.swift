import ArgumentParser
import MentoryClient
import MentoryWire

/// `mentoryctl reload`: re-read the daemon's configuration and wait for the outcome.
struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Make mentoryd re-read its configuration now; fail if it cannot be used.",
        discussion: """
            Unlike SIGHUP, this waits until the daemon has applied the new configuration, and exits \
            non-zero with the reason (the config file and what is wrong in it) when it has not; the \
            previous configuration then stays in effect. The unit's ExecReload= runs it, so that \
            `systemctl reload mentoryd` fails on a bad configuration. Root or the daemon's own user only.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    func run() throws {
        try self.options.withConnection { client in
            _ = try client.call(MentorySchema.Daemon.reload, Mentory_V1_DaemonReloadRequest())
            if self.options.json {
                print(#"{"reloaded":true}"#)
            } else {
                print("mentoryd reloaded its configuration.")
            }
        }
    }
}
