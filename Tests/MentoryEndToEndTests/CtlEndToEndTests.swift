import Foundation
import MentoryClient
import MentoryWire
import Testing

@Suite("End to end through mentoryctl", .serialized, .timeLimit(.minutes(10)))
struct CtlEndToEndTests {
    @Test("every mentoryctl command works against the running daemon")
    func everyCommand() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }

        let ping = try await daemon.ctl(["ping"])
        #expect(ping.status == 0)
        #expect(ping.stdout.hasPrefix("pong from mentoryd"))
        #expect(try await daemon.ctl(["ping", "--json"]).json()["ok"] as? Bool == true)

        let status = try await daemon.ctl(["status", "--json"]).json()
        #expect(status["serverVersion"] as? String == "0.1.0")
        let handlers = try #require(status["handlers"] as? [[String: Any]])
        #expect(
            handlers.compactMap { $0["namespace"] as? String } == [
                "session", "plugin", "mentor", "reachability", "diary", "daemon", "storage",
            ])
        #expect(try await daemon.ctl(["status"]).stdout.contains("connections:"))

        // mentor
        let set = try await daemon.ctl([
            "mentor", "set", "--content", "Drink water.", "--character", "warm", "--todo", "one glass", "--todo",
            "two glasses", "--json",
        ])
        #expect(set.status == 0, "\(set.stderr)")
        let message = try #require(try set.json()["message"] as? [String: Any])
        #expect(message["character"] as? String == "MENTOR_CHARACTER_WARM")
        let todos = try #require(message["actionItems"] as? [[String: Any]])
        let todoID = try #require(todos.first?["id"] as? String)
        let completed = try await daemon.ctl(["mentor", "complete-todo", todoID])
        #expect(completed.status == 0)
        #expect(completed.stdout.contains("[x] one glass"))
        let get = try await daemon.ctl(["mentor", "get"])
        #expect(get.stdout.contains("Drink water."))
        #expect(get.stdout.contains("[ ] two glasses"))

        // reachability
        let report = try await daemon.ctl(["reachability", "report", "watch", "--reachable", "true", "--json"])
        #expect(try report.json()["peer"] as? String == "watch")
        let peers = try await daemon.ctl(["reachability", "get"])
        #expect(peers.stdout.contains("watch  paired  app installed"))
        #expect(
            peers.stdout.contains("unreachable"), "the reporting mentoryctl has exited, so the watch is unreachable")

        // diary
        let add = try await daemon.ctl([
            "diary", "add", "--emotion", "veryPleasant", "--title", "Good news", "--text", "It worked.",
            "--date", "2026-11-20", "--suggestion", "celebrate", "--json",
        ])
        #expect(add.status == 0, "\(add.stderr)")
        let entry = try add.json()
        let entryID = try #require(entry["id"] as? String)
        #expect(entry["emotion"] as? String == "EMOTION_VERY_PLEASANT")
        let suggestionID = try #require((entry["actionItems"] as? [[String: Any]])?.first?["id"] as? String)
        let today = try await daemon.ctl([
            "diary", "add", "--emotion", "neutral", "--title", "Today", "--text", "Plain.",
        ])
        #expect(today.status == 0, "--date defaults to today: \(today.stderr)")
        #expect(try await daemon.ctl(["diary", "get", entryID]).stdout.contains("It worked."))
        let list = try await daemon.ctl(["diary", "list", "--json"]).json()
        #expect((list["entries"] as? [[String: Any]])?.count == 2)
        let done = try await daemon.ctl(["diary", "suggestion-done", entryID, suggestionID])
        #expect(done.stdout.contains("[x] celebrate"))
        let undone = try await daemon.ctl(["diary", "suggestion-done", entryID, suggestionID, "--undo"])
        #expect(undone.stdout.contains("[ ] celebrate"))

        // watch: a snapshot per topic, as JSON lines.
        let watch = try await daemon.ctl(["watch", "mentor", "diary", "--count", "2", "--json"])
        #expect(watch.status == 0)
        let lines = watch.stdout.split(separator: "\n").map {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(lines.compactMap { $0?["topic"] as? String } == ["mentor", "diary"])
        #expect(lines.compactMap { $0?["kind"] as? String } == ["snapshot", "snapshot"])

        let deleted = try await daemon.ctl(["diary", "delete", entryID])
        #expect(deleted.status == 0)
        #expect(deleted.stdout.hasPrefix("Deleted 2026-11-20"))

        #expect(await daemon.stop() == 0)
    }

    @Test("failures exit non-zero with a message on stderr")
    func failures() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let missing = try await daemon.ctl(["diary", "get", "no-such-id"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("not found"))
        #expect(missing.stdout.isEmpty)

        let empty = try await daemon.ctl([
            "diary", "add", "--emotion", "pleasant", "--title", "", "--text", "x", "--date", "2026-01-01",
        ])
        #expect(empty.status == 1)
        #expect(empty.stderr.contains("title is empty"))

        let badDate = try await daemon.ctl([
            "diary", "add", "--emotion", "pleasant", "--title", "t", "--text", "x", "--date", "2026-02-30",
        ])
        #expect(badDate.status == 64)

        let badEmotion = try await daemon.ctl(["diary", "add", "--emotion", "ecstatic", "--title", "t", "--text", "x"])
        #expect(badEmotion.status == 64)

        let unreachable = try await CommandResult.run(
            DaemonProcess.binary("mentoryctl"), ["ping", "--socket", daemon.directory + "/absent.sock"],
            environment: [:]
        )
        #expect(unreachable.status == 69)
        #expect(unreachable.stderr.contains("cannot connect"))
        #expect(unreachable.stderr.contains("No socket is there"), "\(unreachable.stderr)")
        await daemon.stop()
    }

    @Test(
        "a socket the caller may not write says permission denied and what to do, not 'Is the daemon running?'",
        .enabled(if: getuid() == 0, "only root can run mentoryctl as another user")
    )
    func permissionDeniedOnTheSocket() async throws {
        // The socket is root's, mode 0600; its directory is root's too, so uid 65534 trusts it and
        // reaches it, and connect(2) fails with EACCES.
        let daemon = try await DaemonProcess(environment: ["MENTORYD_SOCKET_MODE": "0600"])
        defer { daemon.removeFiles() }
        let denied = try await CommandResult.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", DaemonProcess.binary("mentoryctl").path,
                "ping", "--socket", daemon.socketPath,
            ],
            environment: [:]
        )
        #expect(denied.status == 69)
        #expect(denied.stderr.contains("Permission denied on the socket"), "\(denied.stderr)")
        #expect(denied.stderr.contains("ls -l \(daemon.socketPath)"), "\(denied.stderr)")
        #expect(!denied.stderr.contains("Is the daemon running"), "\(denied.stderr)")
        await daemon.stop()
    }

    @Test("a refused connect names the cause by errno, and never asks to set MENTORY_SOCKET when it names the socket")
    func connectHints() {
        let refused = MentoryClientError.cannotConnect(
            path: "/nowhere/d.sock", reason: "connect(descriptor:addr:size:): Connection refused (errno: 111)")
        #expect(refused.description.contains("Nothing listens on the socket"), "\(refused)")
        let denied = MentoryClientError.cannotConnect(
            path: "/nowhere/d.sock", reason: "connect(descriptor:addr:size:): Permission denied (errno: 13)")
        #expect(denied.description.contains("Permission denied on the socket"), "\(denied)")
        let other = MentoryClientError.cannotConnect(path: "/nowhere/d.sock", reason: "something else")
        #expect(other.description.contains("Is the daemon running?"), "\(other)")
        // The test process has no MENTORY_SOCKET naming /nowhere/d.sock: the hint offers it.
        #expect(other.description.contains("pass --socket or set MENTORY_SOCKET"), "\(other)")
        for error in [refused, denied, other] {
            let text = error.description
            #expect(text.filter { $0 == "(" }.count == text.filter { $0 == ")" }.count, "\(text)")
        }
    }
}
