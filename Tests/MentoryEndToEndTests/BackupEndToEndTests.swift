import Foundation
import Glibc
import MentoryClient
import MentoryTestSupport
import MentoryWire
import Testing

@Suite("mentoryctl backup streams the database through the socket", .serialized, .timeLimit(.minutes(10)))
struct BackupEndToEndTests {
    /// Files a backup leaves in the state directory while a snapshot exists.
    static func snapshots(in daemon: DaemonProcess) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: daemon.directory + "/state")) ?? []
        return names.filter { $0.hasPrefix(".mentoryd-backup-") }
    }

    @Test("the copy lands where the caller asked, owned by the caller, complete; an existing file is refused")
    func backupWritesCallersFile() async throws {
        // The smallest frame limit (every reply must still fit a frame) and long entries make the
        // snapshot travel in several pieces.
        let daemon = try await DaemonProcess(arguments: ["--max-frame-length", "262144"])
        defer { daemon.removeFiles() }
        let entries = 16
        for day in 1...entries {
            let added = try await daemon.ctl([
                "diary", "add", "--emotion", "neutral", "--title", "Day \(day)",
                "--text", String(repeating: "A long quiet day. ", count: 3300),
                "--date", String(format: "2026-10-%02d", day),
            ])
            #expect(added.status == 0, "\(added.stderr)")
        }
        let directory = daemon.directory + "/elsewhere"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let destination = directory + "/copy.sqlite"

        let backup = try await daemon.ctl(["backup", "--to", destination, "--json"])
        #expect(backup.status == 0, "\(backup.stderr)")
        let reply = try backup.json()
        #expect(reply["diaryEntries"] as? Int == entries)
        var info = stat()
        #expect(stat(destination, &info) == 0)
        #expect(reply["bytes"] as? Int == Int(info.st_size))
        #expect(info.st_size > 262_144 * 3, "the copy took several pieces")
        #expect(info.st_uid == getuid(), "mentoryctl wrote it, with the caller's uid")
        #expect(info.st_mode & 0o777 == 0o600)
        let data = try Data(contentsOf: URL(fileURLWithPath: destination))
        #expect(data.prefix(16) == Data("SQLite format 3\u{0}".utf8))
        // Nothing left behind: no temporary file beside the copy, no snapshot in the state directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["copy.sqlite"])
        #expect(Self.snapshots(in: daemon).isEmpty)
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3") {
            let check = try await CommandResult.run(
                URL(fileURLWithPath: "/usr/bin/sqlite3"), [destination, "PRAGMA integrity_check;"], environment: [:])
            #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(check.stderr)")
        }

        // A second backup to the same path is refused and leaves the file as it was.
        let again = try await daemon.ctl(["backup", "--to", destination])
        #expect(again.status == 1)
        #expect(again.stderr.contains("already exists"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == data)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["copy.sqlite"])

        // A missing directory is named.
        let missing = try await daemon.ctl(["backup", "--to", directory + "/no/such/dir/copy.sqlite"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("does not exist"))
        #expect(await daemon.stop() == 0)
    }

    @Test("the in-memory backend has nothing to back up, and says so")
    func inMemoryBackendFails() async throws {
        let daemon = try await DaemonProcess(environment: ["MENTORYD_STORAGE_BACKEND": "memory"])
        defer { daemon.removeFiles() }
        let destination = daemon.directory + "/copy.sqlite"
        let backup = try await daemon.ctl(["backup", "--to", destination])
        #expect(backup.status == 1)
        #expect(backup.stderr.contains("in memory"))
        #expect(!FileManager.default.fileExists(atPath: destination))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.directory)
        #expect(!leftovers.contains { $0.contains("partial") }, "\(leftovers)")
        #expect(await daemon.stop() == 0)
    }

    @Test("snapshots are bounded: two at once, removed when their connection closes")
    func snapshotsAreBounded() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.removeFiles() }
        let first = try await daemon.client("first")
        let second = try await daemon.client("second")
        let third = try await daemon.client("third")
        let taken: Mentory_V1_StorageBackupReply = try await first.call(
            "storage", "backup", Mentory_V1_StorageBackupRequest())
        #expect(taken.bytes > 0)
        #expect(taken.chunkBytes == 512 * 1024)
        let _: Mentory_V1_StorageBackupReply = try await second.call(
            "storage", "backup", Mentory_V1_StorageBackupRequest())
        #expect(Self.snapshots(in: daemon).count == 2)
        await #expect {
            let _: Mentory_V1_StorageBackupReply = try await third.call(
                "storage", "backup", Mentory_V1_StorageBackupRequest())
        } throws: { error in
            (error as? MentoryClientError)?.remoteCode == .conflict
        }
        // Reading needs a snapshot of one's own.
        await #expect {
            var read = Mentory_V1_StorageBackupReadRequest()
            read.offset = 0
            let _: Mentory_V1_StorageBackupReadReply = try await third.call("storage", "backupRead", read)
        } throws: { error in
            (error as? MentoryClientError)?.remoteCode == .conflict
        }
        // An abandoned snapshot goes with its connection, which frees a place.
        await first.close()
        _ = await eventually(timeout: .seconds(20), interval: .milliseconds(20)) {
            Self.snapshots(in: daemon).count <= 1
        }
        #expect(Self.snapshots(in: daemon).count == 1)
        let _: Mentory_V1_StorageBackupReply = try await third.call(
            "storage", "backup", Mentory_V1_StorageBackupRequest())
        await second.close()
        await third.close()
        // Shut-down removes the rest.
        #expect(await daemon.stop() == 0)
        #expect(Self.snapshots(in: daemon).isEmpty)
    }
}
