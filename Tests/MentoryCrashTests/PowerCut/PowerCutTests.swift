import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire
import Testing

/// A SIGKILL cannot show a missing fsync: the page cache survives it. These tests record every
/// write, sync and directory operation a real mentoryd makes under its state directory (an
/// LD_PRELOAD shim, `powercut_shim.c`), rebuild what a disk would hold after a power cut at each
/// sync (``DiskModel``), start mentoryd on each rebuilt directory, and check that the store opens
/// and that every entry acknowledged before the cut is there, identical.
@Suite(
    "mentoryd against power cuts: a cut at any sync loses nothing acknowledged",
    .serialized,
    .timeLimit(.minutes(10)),
    .disabled(
        if: Sanitizers.threadSanitizerIsActive,
        "checks durability, not races; ThreadSanitizer's interceptors sit in front of the recorder"
    )
)
struct PowerCutTests {
    /// The recorded daemons, one after the other on the same state directory: the diary entries each
    /// adds (one acknowledged write and one log sync each), and how it stops. The first is a first
    /// start; the second starts after a clean shutdown (the clean-shutdown marker is cleared without
    /// a sync, the integrity check runs in the background) and is killed.
    static let runs: [(entries: Int, stop: Int32)] = [(14, SIGTERM), (6, SIGKILL)]
    static var entries: Int { runs.map(\.entries).reduce(0, +) }
    /// The most cut points one check rebuilds and checks (a daemon start for each distinct rebuilt
    /// directory); past it they are sampled evenly, those of the first start always checked.
    static let maxCutPoints = 160

    @Test(
        "a power cut right after any sync (first start, writes, checkpoints, clean stop, restart) loses nothing acknowledged"
    )
    func acknowledgedEntriesSurvivePowerCuts() async throws {
        try await withScratchDirectory { directory in
            let harness = try PowerCutHarness(directory: directory)
            let run = try await harness.record(suppressing: .nothing)
            let outcome = try await harness.check(run, crash: .powerCut, stopAtFirstFailure: false)
            print(
                "power cut: \(run.log.cutPoints.count) syncs recorded (\(run.firstStartCutPoints) in the first start), "
                    + "\(outcome.cutPointsChecked) cut points checked on \(outcome.daemonsStarted) rebuilt directories, "
                    + "\(outcome.entriesChecked) acknowledged entries checked, \(outcome.failures.count) failures"
            )
            #expect(run.acknowledged.count == Self.entries)
            #expect(outcome.cutPointsChecked >= 40)
            #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5).joined(separator: "\n"))")
        }
    }

    @Test("a kill after any sync of a first start leaves a database mentoryd opens")
    func firstStartSurvivesKills() async throws {
        try await withScratchDirectory { directory in
            let harness = try PowerCutHarness(directory: directory)
            let run = try await harness.record(suppressing: .nothing, runs: [(1, SIGTERM)])
            let outcome = try await harness.check(
                run, crash: .processKill, stopAtFirstFailure: false, onlyFirstStart: true)
            print(
                "first-start kills: \(outcome.cutPointsChecked) cut points checked on \(outcome.daemonsStarted) "
                    + "directories, \(outcome.failures.count) failures"
            )
            #expect(outcome.cutPointsChecked == run.firstStartCutPoints)
            // The state directory's entry, the new database (NewDatabase), its entry after the rename, and the
            // first write's log: a first start syncs nothing more before its first acknowledgment.
            #expect(run.firstStartCutPoints >= 4)
            #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5).joined(separator: "\n"))")
        }
    }

    @Test(
        "negative control: a mentoryd whose syncs are suppressed loses acknowledged entries, and the harness sees it",
        arguments: [PowerCutHarness.Suppression.allSyncs, .directorySyncs]
    )
    func harnessDetectsSuppressedSyncs(suppressing: PowerCutHarness.Suppression) async throws {
        try await withScratchDirectory { directory in
            let harness = try PowerCutHarness(directory: directory)
            let run = try await harness.record(suppressing: suppressing)
            let outcome = try await harness.check(run, crash: .powerCut, stopAtFirstFailure: true)
            print(
                "power cut, \(suppressing.rawValue) suppressed: \(run.log.cutPoints.count) syncs recorded, "
                    + "\(outcome.cutPointsChecked) cut points checked before the first loss: "
                    + "\(outcome.failures.first ?? "none")"
            )
            #expect(run.acknowledged.count == Self.entries)
            #expect(!outcome.failures.isEmpty, "the harness found no loss in a daemon that never syncs")
        }
    }
}

/// Records one mentoryd run under the shim, and checks the directories rebuilt from its log.
struct PowerCutHarness {
    /// A recorded run: its log, and each acknowledged entry with the log's length right after its
    /// acknowledgment arrived.
    struct Run {
        var log: PowerCutLog
        var acknowledged: [(entry: Mentory_V1_DiaryEntry, logPosition: Int)]
        /// Cut points before the first acknowledgment: the first start (and the first write).
        var firstStartCutPoints: Int
    }

    struct Outcome {
        var cutPointsChecked = 0
        var daemonsStarted = 0
        var entriesChecked = 0
        var failures: [String] = []
    }

    /// Which syncs the shim suppresses (the negative controls).
    enum Suppression: String, Sendable, CustomTestStringConvertible {
        case nothing = "nothing"
        case allSyncs = "every sync"
        case directorySyncs = "directory syncs"

        var shimMode: String {
            switch self {
            case .nothing: "record"
            case .allSyncs: "nosync"
            case .directorySyncs: "nodirsync"
            }
        }

        var testDescription: String { self.rawValue }
    }

    let directory: String
    /// The root the shim watches (canonical, as it logs paths); the daemon's state directory is
    /// `state` in it, which the daemon creates.
    let root: String
    let shim: String

    init(directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory + "/disk", withIntermediateDirectories: false)
        guard let resolved = realpath(directory + "/disk", nil) else { throw CrashTestError("realpath failed") }
        self.root = String(cString: resolved)
        free(resolved)
        self.shim = directory + "/powercut_shim.so"
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("powercut_shim.c").path
        // `cc`, else the Swift toolchain's `clang`.
        let built = ["cc", "clang"].contains { compiler in
            runCommandToCompletion([
                compiler, "-shared", "-fPIC", "-O1", "-o", self.shim, source, "-ldl", "-lpthread",
            ]) == 0
        }
        guard built else {
            throw CrashTestError("neither cc nor clang could build \(source) into \(self.shim)")
        }
    }

    /// Runs mentoryd under the shim on a fresh state directory, once for each of `runs`: it starts,
    /// adds that run's diary entries one after the other, and stops with that run's signal (a clean
    /// close after SIGTERM is recorded too).
    func record(
        suppressing: Suppression,
        runs: [(entries: Int, stop: Int32)] = PowerCutTests.runs
    ) async throws -> Run {
        let logPath = self.directory + "/powercut.log"
        guard FileManager.default.createFile(atPath: logPath, contents: nil) else {
            throw CrashTestError("cannot create \(logPath)")
        }
        var acknowledged: [(entry: Mentory_V1_DiaryEntry, logPosition: Int)] = []
        for (entries, stop) in runs {
            let first = acknowledged.count
            acknowledged += try await self.recordRun(
                suppressing: suppressing, logPath: logPath, entries: first..<(first + entries), stop: stop)
        }
        let log = try PowerCutLog(path: logPath)
        let firstAck = acknowledged.first?.logPosition ?? Int.max
        let firstStart = log.cutPoints.filter { log.records[$0].end < firstAck }.count
        guard !log.cutPoints.isEmpty else {
            throw CrashTestError("the shim recorded no sync under \(self.root): is LD_PRELOAD honoured?")
        }
        return Run(log: log, acknowledged: acknowledged, firstStartCutPoints: firstStart)
    }

    /// One recorded daemon: starts on the state directory, adds the diary entries `entries`
    /// (indexes of ``addRequest(_:client:)``), and stops with `stop`.
    private func recordRun(
        suppressing: Suppression,
        logPath: String,
        entries: Range<Int>,
        stop: Int32
    ) async throws -> [(entry: Mentory_V1_DiaryEntry, logPosition: Int)] {
        let daemon = try await DaemonProcess.start(
            socketPath: self.directory + "/record.sock",
            stateDirectory: self.root + "/state",
            logPath: self.directory + "/record.log",
            environment: [
                "LD_PRELOAD": self.shim,
                "MENTORY_POWERCUT_ROOT": self.root,
                "MENTORY_POWERCUT_LOG": logPath,
                "MENTORY_POWERCUT_MODE": suppressing.shimMode,
                // Checkpoints every few entries, so that cuts fall inside them too.
                "MENTORYD_STORAGE_CHECKPOINT_PAGES": "8",
                "MENTORYD_STORAGE_MAX_LOG_PAGES": "16",
            ]
        )
        var acknowledged: [(entry: Mentory_V1_DiaryEntry, logPosition: Int)] = []
        let client = try await MentoryClient.connect(socketPath: daemon.socketPath, clientName: "power-cut")
        for index in entries {
            let entry = try await client.diaryAdd(addRequest(index, client: 0))
            // Everything the daemon did before the acknowledgment is in the log by now.
            acknowledged.append((entry, Int(FileManager.default.fileSize(logPath))))
        }
        await client.close()
        let status = await daemon.stop(with: stop)
        guard stop != SIGTERM || status == 0 else {
            throw CrashTestError("the recorded mentoryd exited with \(status):\n\(daemon.logTail())")
        }
        return acknowledged
    }

    /// Rebuilds the state after `crash` at each cut point (or a bounded, evenly spaced sample, the
    /// first start's cut points always included), starts mentoryd on each distinct one, and checks
    /// it: the store opens, and every entry acknowledged before the cut is there, identical.
    func check(
        _ run: Run,
        crash: DiskModel.Crash,
        stopAtFirstFailure: Bool,
        onlyFirstStart: Bool = false
    ) async throws -> Outcome {
        let cutPoints = run.log.cutPoints
        var selected = Set(cutPoints.prefix(run.firstStartCutPoints))
        if !onlyFirstStart {
            let rest = Array(cutPoints.dropFirst(run.firstStartCutPoints))
            let room = max(1, PowerCutTests.maxCutPoints - selected.count)
            let stride = max(1, (rest.count + room - 1) / room)
            for (position, cut) in rest.enumerated() where position % stride == 0 || position == rest.count - 1 {
                selected.insert(cut)
            }
        }
        var outcome = Outcome()
        var model = DiskModel(root: self.root)
        // Each distinct rebuilt tree is checked once: what the daemon served from it, or why not.
        var served: [Int: Result<[String: Mentory_V1_DiaryEntry], CrashTestError>] = [:]
        for (index, record) in run.log.records.enumerated() {
            try model.apply(record.operation, of: run.log)
            guard selected.contains(index) else { continue }
            outcome.cutPointsChecked += 1
            let target = self.directory + "/cut"
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
            let digest = try model.materialize(crash, into: target)
            if served[digest] == nil {
                served[digest] = try await self.serve(target)
                outcome.daemonsStarted += 1
            }
            try? FileManager.default.removeItem(atPath: target)
            let required = run.acknowledged.filter { $0.logPosition <= record.end }
            outcome.entriesChecked += required.count
            let syncNumber = (cutPoints.firstIndex(of: index) ?? -1) + 1
            switch served[digest]! {
            case .failure(let refusal):
                outcome.failures.append("cut at sync \(syncNumber) (\(record.operation)): \(refusal)")
            case .success(let stored):
                let lost = required.filter { stored[$0.entry.id] != $0.entry }
                if !lost.isEmpty {
                    outcome.failures.append(
                        "cut at sync \(syncNumber) (\(record.operation)): \(lost.count) of \(required.count) "
                            + "acknowledged entries lost or changed, first \(lost[0].entry.recordDate)"
                    )
                }
            }
            if stopAtFirstFailure && !outcome.failures.isEmpty { break }
        }
        return outcome
    }

    /// Starts mentoryd on the rebuilt tree `target` (its `state` directory) and returns every entry
    /// it serves, or why it would not start.
    private func serve(_ target: String) async throws -> Result<[String: Mentory_V1_DiaryEntry], CrashTestError> {
        let socket = self.directory + "/check.sock"
        let logPath = self.directory + "/check.log"
        try? FileManager.default.removeItem(atPath: logPath)
        let daemon: DaemonProcess
        do {
            daemon = try await DaemonProcess.start(
                socketPath: socket, stateDirectory: target + "/state", logPath: logPath)
        } catch let error as CrashTestError {
            return .failure(CrashTestError("mentoryd did not start: \(error.description.suffix(600))"))
        }
        // A check that throws leaves `daemon`, whose deinit kills the process.
        let client = try await MentoryClient.connect(socketPath: socket, clientName: "power-cut-check")
        let entries = try await CrashConsistencyTests.listAll(client)
        await client.close()
        await daemon.stop(with: SIGKILL)
        return .success(Dictionary(entries.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }))
    }
}

extension FileManager {
    /// The size of the file at `path`, 0 when it cannot be read.
    fileprivate func fileSize(_ path: String) -> Int64 {
        ((try? self.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }
}
