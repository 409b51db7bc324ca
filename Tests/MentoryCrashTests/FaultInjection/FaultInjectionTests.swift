import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import Testing

/// A real mentoryd whose database files fail to write, or to sync, while it serves: an LD_PRELOAD
/// shim (`fault_shim.c`) makes `write`/`pwrite`/`writev`, or `fsync`/`fdatasync`, of the database's
/// files fail with ENOSPC or EIO for as long as the test says, through a control file the shim maps.
@Suite(
    "mentoryd under I/O faults: a full disk or an I/O error is reported, logged, loses nothing and heals",
    .timeLimit(.minutes(10)),
    .disabled(
        if: Sanitizers.threadSanitizerIsActive,
        "checks error handling, not races; ThreadSanitizer's interceptors sit in front of the shim"
    )
)
struct FaultInjectionTests {
    /// One row: which calls fail, with which errno, and what the client and the log then say.
    struct Fault: Sendable, CustomTestStringConvertible {
        /// The shim's control text (`write ENOSPC`).
        var control: String
        /// What the client's error message says of the cause.
        var clientSays: String
        /// SQLite's result code, as the log line names it.
        var logCode: String
        /// The system's error, as the log line names it, when SQLite reports it: SQLite 3.40 keeps no
        /// errno for a failed commit, so the log names it only where SQLite's code implies it.
        var logErrno: String?

        var testDescription: String { self.control }
    }

    static let faults: [Fault] = [
        // SQLite reports a write's ENOSPC as SQLITE_FULL, without an errno.
        Fault(control: "write ENOSPC", clientSays: "is full", logCode: "SQLITE_FULL (13)", logErrno: "ENOSPC"),
        Fault(control: "write EIO", clientSays: "I/O error", logCode: "SQLITE_IOERR_WRITE (778)", logErrno: nil),
        // Any failed sync is SQLITE_IOERR_FSYNC to SQLite, whatever the errno.
        Fault(control: "sync ENOSPC", clientSays: "I/O error", logCode: "SQLITE_IOERR_FSYNC (1034)", logErrno: nil),
        Fault(control: "sync EIO", clientSays: "I/O error", logCode: "SQLITE_IOERR_FSYNC (1034)", logErrno: nil),
    ]

    /// Writes refused while the fault lasts: more than one, so that the log's rate limit shows.
    static let failedWrites = 5

    @Test(
        "the client gets a storage failure, the log names the path and the cause, reads go on, nothing acknowledged is lost, writes resume without a restart",
        arguments: Self.faults)
    func faultIsReportedAndHealed(fault: Fault) async throws {
        try await withScratchDirectory { directory in
            let harness = try FaultHarness(directory: directory)
            let database = harness.state + "/mentoryd.sqlite"
            var daemon = try await DaemonProcess.start(
                socketPath: directory + "/mentoryd.sock",
                stateDirectory: harness.state,
                logPath: directory + "/mentoryd.log",
                environment: harness.environment
            )
            let client = try await MentoryClient.connect(socketPath: daemon.socketPath, clientName: "fault-injection")
            var acknowledged: [Mentory_V1_DiaryEntry] = []
            for index in 0..<5 {
                acknowledged.append(try await client.diaryAdd(addRequest(index, client: 0)))
            }

            // The fault: every write is refused with a storage failure, and reads are served.
            try harness.set(fault.control)
            var refused: [Mentory_V1_DiaryAddRequest] = []
            for index in 5..<(5 + Self.failedWrites) {
                let request = addRequest(index, client: 0)
                do throws(MentoryClientError) {
                    let entry = try await client.diaryAdd(request)
                    Issue.record("an add was acknowledged during '\(fault.control)': \(entry.recordDate)")
                    acknowledged.append(entry)
                } catch {
                    #expect(error.remoteCode == .storageFailure, "\(error)")
                    let message = error.remoteError?.message ?? "\(error)"
                    #expect(message.contains(fault.clientSays), "\(message)")
                    #expect(message.contains(database), "\(message)")
                    #expect(message.contains("not saved"), "\(message)")
                    refused.append(request)
                }
                let listed = try await CrashConsistencyTests.listAll(client)
                #expect(Set(listed) == Set(acknowledged), "reads during '\(fault.control)' served something else")
            }
            #expect(try harness.injectedFaults() > 0, "the shim injected nothing: is LD_PRELOAD honoured?")

            // The journal's line: error priority, the path, the cause; one line for several failures.
            let failureLines = { () -> [String] in
                self.lines(of: daemon.logPath).filter { $0.contains("storage failure: a commit to \(database) failed") }
            }
            try await waitUntil("mentoryd logged the storage failure") { !failureLines().isEmpty }
            let line = try #require(failureLines().first)
            #expect(line.contains(" error "), "not at error priority: \(line)")
            #expect(line.contains(fault.logCode), "\(line)")
            if let errno = fault.logErrno { #expect(line.contains(errno), "\(line)") }
            #expect(line.contains(fault.clientSays), "\(line)")
            let logged = failureLines().count
            #expect(logged < refused.count, "not rate-limited: \(failureLines())")

            // The fault clears: the next writes succeed on the same daemon, and the log says so.
            try harness.set("none")
            for index in 100..<103 {
                acknowledged.append(try await client.diaryAdd(addRequest(index, client: 0)))
            }
            try await waitUntil("mentoryd logged that commits succeed again") {
                self.lines(of: daemon.logPath).contains {
                    $0.contains("storage recovered: commits to \(database) succeed again after")
                }
            }
            let served = try await CrashConsistencyTests.listAll(client)
            #expect(Set(served) == Set(acknowledged))
            #expect(Set(served.map(\.recordDate)).isDisjoint(with: refused.map(\.recordDate)))
            await client.close()
            let status = await daemon.stop(with: SIGTERM)
            #expect(status == 0, "mentoryd exited with \(status):\n\(daemon.logTail())")

            // And after a restart, without the shim: every acknowledged entry, identical.
            daemon = try await DaemonProcess.start(
                socketPath: directory + "/mentoryd.sock",
                stateDirectory: harness.state,
                logPath: directory + "/restart.log"
            )
            let verifier = try await MentoryClient.connect(socketPath: daemon.socketPath, clientName: "verifier")
            let stored = try await CrashConsistencyTests.listAll(verifier)
            await verifier.close()
            await daemon.stop(with: SIGTERM)
            #expect(Set(stored) == Set(acknowledged))
            print(
                "fault '\(fault.control)': \(try harness.injectedFaults()) calls failed, \(refused.count) writes "
                    + "refused, \(logged) log line(s): \(line.suffix(260))"
            )
        }
    }

    private func lines(of path: String) -> [String] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }
}

/// The shim, built for the test, and its control file.
struct FaultHarness {
    /// The control file's size and where its count of injected failures sits (`fault_shim.c`).
    static let controlSize = 64
    static let countOffset = 56

    let state: String
    let shim: String
    let control: String

    init(directory: String) throws {
        // The shim resolves the state directory when it loads: it must exist by then.
        self.state = directory + "/state"
        try FileManager.default.createDirectory(
            atPath: self.state, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        self.shim = directory + "/fault_shim.so"
        self.control = directory + "/fault.control"
        guard FileManager.default.createFile(atPath: self.control, contents: Data(count: Self.controlSize)) else {
            throw CrashTestError("cannot create \(self.control)")
        }
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("fault_shim.c").path
        let built = ["cc", "clang"].contains { compiler in
            runCommandToCompletion([
                compiler, "-shared", "-fPIC", "-O1", "-o", self.shim, source, "-ldl", "-lpthread",
            ]) == 0
        }
        guard built else {
            throw CrashTestError("neither cc nor clang could build \(source) into \(self.shim)")
        }
    }

    /// The daemon's environment: the shim, the directory it watches and its control file.
    var environment: [String: String] {
        ["LD_PRELOAD": self.shim, "MENTORY_FAULT_ROOT": self.state, "MENTORY_FAULT_CONTROL": self.control]
    }

    /// Switches the fault (`write EIO`, `sync ENOSPC`, `none`); the daemon sees it at its next call.
    func set(_ text: String) throws {
        var bytes = [UInt8](text.utf8)
        bytes += [UInt8](repeating: 0, count: Self.countOffset - bytes.count)
        let descriptor = open(self.control, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CrashTestError("cannot open \(self.control)") }
        defer { close(descriptor) }
        guard bytes.withUnsafeBytes({ pwrite(descriptor, $0.baseAddress, $0.count, 0) }) == bytes.count else {
            throw CrashTestError("cannot write \(self.control)")
        }
    }

    /// How many calls the shim has failed so far.
    func injectedFaults() throws -> UInt64 {
        let descriptor = open(self.control, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CrashTestError("cannot open \(self.control)") }
        defer { close(descriptor) }
        var count: UInt64 = 0
        guard withUnsafeMutableBytes(of: &count, { pread(descriptor, $0.baseAddress, 8, off_t(Self.countOffset)) }) == 8
        else { throw CrashTestError("cannot read \(self.control)") }
        return count
    }
}
