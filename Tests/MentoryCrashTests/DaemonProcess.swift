import Foundation
import MentoryClient
import MentoryDomain
import MentoryTestSupport
import MentoryWire

struct CrashTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fresh directory for one test, removed afterwards.
func withScratchDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    var template = Array((NSTemporaryDirectory() + "/mentory-crash.XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String? in
        guard let result = mkdtemp(buffer.baseAddress!) else { return nil }
        return String(cString: result)
    }
    guard let path else { throw CrashTestError("mkdtemp failed") }
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

/// One run of the real daemon on a socket and a state directory.
final class DaemonProcess {
    let socketPath: String
    let stateDirectory: String
    let logPath: String
    private let process: Process

    private init(process: Process, socketPath: String, stateDirectory: String, logPath: String) {
        self.process = process
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.logPath = logPath
    }

    /// Starts mentoryd, with `environment` added to the test's (less its `MENTORYD_*` variables);
    /// with `waitUntilServing`, returns once a client can connect.
    static func start(
        socketPath: String,
        stateDirectory: String,
        logPath: String,
        waitUntilServing: Bool = true,
        environment: [String: String] = [:]
    ) async throws -> DaemonProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ProductBinaries.path(of: "mentoryd"))
        process.arguments = ["--socket", socketPath, "--state-dir", stateDirectory, "--log-level", "info"]
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("MENTORYD_") }
            .merging(environment) { _, added in added }
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try log.seekToEnd()
        process.standardError = log
        process.standardOutput = log
        try await process.runTiedToTestProcess()
        try log.close()
        let daemon = DaemonProcess(
            process: process, socketPath: socketPath, stateDirectory: stateDirectory, logPath: logPath)
        if waitUntilServing {
            try await daemon.waitUntilServing()
        }
        return daemon
    }

    /// A daemon still running when its test lets go of it (a failed or timed-out test) is killed.
    deinit {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
        }
    }

    var isRunning: Bool { self.process.isRunning }
    var pid: Int32 { self.process.processIdentifier }

    func waitUntilServing() async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if let client = try? await MentoryClient.connect(socketPath: self.socketPath, clientName: "probe") {
                await client.close()
                return
            }
            guard self.process.isRunning else {
                throw CrashTestError(
                    "mentoryd exited with status \(self.process.terminationStatus):\n\(self.logTail())")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw CrashTestError("mentoryd did not serve within 120 s:\n\(self.logTail())")
    }

    /// Sends `signal` and waits for the process to end; returns its exit status (or signal number).
    @discardableResult
    func stop(with signal: Int32) async -> Int32 {
        if self.process.isRunning {
            kill(self.process.processIdentifier, signal)
        }
        while self.process.isRunning {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return self.process.terminationStatus
    }

    /// Waits for the process to end by itself and returns its exit status.
    func waitForExit(timeout: Duration = .seconds(30)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while self.process.isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return self.process.terminationStatus
    }

    var terminationReason: Process.TerminationReason { self.process.terminationReason }

    /// The last lines the daemon logged.
    func logTail(lines: Int = 30) -> String {
        let text = (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }
}

/// The calendar day `index` days after 1000-01-01: distinct indexes give distinct record dates.
func recordDate(_ index: Int) -> String {
    // Howard Hinnant's civil_from_days, on days counted from 0000-03-01.
    let days = index + 365_183  // 1000-01-01 is day 365,183 counted from 0000-03-01
    let era = days / 146_097
    let dayOfEra = days - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthPrime = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
    let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
    let year = era * 400 + yearOfEra + (month <= 2 ? 1 : 0)
    return CalendarDay(year: year, month: month, day: day)!.description
}

/// An add request with every field set, varied by `index`.
func addRequest(_ index: Int, client: Int) -> Mentory_V1_DiaryAddRequest {
    var request = Mentory_V1_DiaryAddRequest()
    request.recordDate = recordDate(index)
    request.title = "Client \(client), entry \(index)"
    request.text = "Entry \(index): " + String(repeating: "words and more words ", count: 1 + index % 17)
    request.emotion = Mentory_V1_Emotion(rawValue: 1 + index % 7) ?? .neutral
    if index % 3 != 0 {
        request.analysis = "Analysis of \(index)"
    }
    request.actionItems = (0..<(index % 4)).map { item in
        var actionItem = Mentory_V1_ActionItem()
        actionItem.id = "c\(client)-e\(index)-i\(item)"
        actionItem.text = "Step \(item) of \(index)"
        actionItem.done = (index + item) % 2 == 0
        return actionItem
    }
    return request
}

/// Resumes a continuation once, whichever of several tasks gets there first.
actor OnceFlag {
    private var claimed = false

    /// `true` for the first caller only.
    func claim() -> Bool {
        defer { self.claimed = true }
        return !self.claimed
    }
}

struct DeadlineExceeded: Error, CustomStringConvertible {
    var description: String { "the call did not finish in time" }
}

/// Runs `body`, giving up after `limit`.
///
/// The daemon under test is killed at random moments, and `EventLoopFuture.get()` ignores
/// cancellation; so `body` runs in its own task, which is abandoned when the deadline passes,
/// and a client bug that left a call unanswered fails the test instead of hanging the suite.
func withDeadline<T: Sendable>(
    _ limit: Duration,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let once = OnceFlag()
        Task {
            do {
                let value = try await body()
                if await once.claim() { continuation.resume(returning: value) }
            } catch {
                if await once.claim() { continuation.resume(throwing: error) }
            }
        }
        Task {
            try? await Task.sleep(for: limit)
            if await once.claim() { continuation.resume(throwing: DeadlineExceeded()) }
        }
    }
}
