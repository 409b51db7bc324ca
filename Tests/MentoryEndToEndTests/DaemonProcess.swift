import Foundation
import Glibc
import MentoryClient
import MentoryTestSupport

/// A real `mentoryd` process on a temporary socket, for tests.
final class DaemonProcess: Sendable {
    let socketPath: String
    let directory: String
    let logPath: String
    private let process: Process

    static func binary(_ name: String) -> URL {
        ProductBinaries.url(of: name)
    }

    /// Starts the daemon and waits until its socket accepts connections. `stateDirectory` defaults to a fresh
    /// one; pass an earlier daemon's to restart it with its state. `config`, when given, is the text of its config
    /// file (written into the daemon's directory and passed with `--config`).
    init(
        socketPath: String? = nil, stateDirectory: String? = nil, arguments: [String] = [],
        environment: [String: String] = [:], config: String? = nil
    ) async throws {
        let directory = "\(TestTemporaryDirectory.path)/mentoryd-test-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = arguments
        if let config {
            try config.write(toFile: directory + "/mentoryd.json", atomically: true, encoding: .utf8)
            arguments += ["--config", directory + "/mentoryd.json"]
        }
        self.directory = directory
        self.socketPath = socketPath ?? directory + "/d.sock"
        self.logPath = directory + "/mentoryd.log"
        _ = FileManager.default.createFile(atPath: self.logPath, contents: nil)
        let process = Process()
        process.executableURL = Self.binary("mentoryd")
        let state = stateDirectory ?? directory + "/state"
        process.arguments = ["--socket", self.socketPath, "--state-dir", state, "--log-level", "debug"] + arguments
        var processEnvironment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("MENTORYD_") && $0.key != "NOTIFY_SOCKET"
        }
        processEnvironment.merge(environment) { $1 }
        process.environment = processEnvironment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: self.logPath))
        try await process.runTiedToTestProcess()
        self.process = process
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if let client = try? await MentoryClient.connect(socketPath: self.socketPath, clientName: "probe") {
                await client.close()
                return
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        process.terminate()
        let failure = DaemonFailure(message: "mentoryd did not start; its log:\n" + self.log)
        try? FileManager.default.removeItem(atPath: directory)
        throw failure
    }

    /// A daemon still running when its test lets go of it (a failed or timed-out test) is killed, and its
    /// directory (socket, state, log) goes with it, so that no test run leaves a `/tmp/mentoryd-test-N` behind.
    deinit {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
        }
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    var log: String {
        (try? String(contentsOfFile: self.logPath, encoding: .utf8)) ?? ""
    }

    var pid: Int32 { self.process.processIdentifier }
    var isRunning: Bool { self.process.isRunning }

    /// Connects a client-library client.
    ///
    /// Its calls wait up to 60 s: a call returns as soon as it is answered, and under ThreadSanitizer,
    /// with the whole suite's daemons sharing two cores, a durable write can take more than 10 s.
    func client(_ name: String = "tests") async throws -> MentoryClient {
        try await MentoryClient.connect(socketPath: self.socketPath, clientName: name, defaultTimeout: .seconds(60))
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    @discardableResult
    func stop() async -> Int32 {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGTERM)
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while self.process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            _ = await self.process.waitForExit()
            return -1
        }
        return self.process.terminationStatus
    }

    func removeFiles() {
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    /// Runs `mentoryctl` against this daemon, with `input` on its standard input (none when `nil`).
    func ctl(_ arguments: [String], input: Data? = nil) async throws -> CommandResult {
        try await CommandResult.run(
            DaemonProcess.binary("mentoryctl"), arguments, environment: ["MENTORY_SOCKET": self.socketPath],
            input: input)
    }
}

struct DaemonFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
}

/// What a finished command printed and how it exited.
struct CommandResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String], input: Data? = nil
    ) async throws -> CommandResult {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var processEnvironment = ProcessInfo.processInfo.environment
        processEnvironment.merge(environment) { $1 }
        process.environment = processEnvironment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let stdin = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        try await process.runTiedToTestProcess()
        if let input {
            // Written from a dedicated thread: the pipe may fill before mentoryctl reads it.
            let writer = stdin.fileHandleForWriting
            Thread.detachNewThread {
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        // Not readToEnd() on the pool: see ChildOutput.
        let output = ChildOutput(stdout: out, stderr: err)
        async let collected = output.collect()
        let status = await process.waitForExit()
        output.childExited()
        let (outData, errData) = await collected
        return CommandResult(
            status: status,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self)
        )
    }

    /// Standard output parsed as one JSON object.
    func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(self.stdout.utf8)) as? [String: Any] else {
            throw DaemonFailure(message: "not a JSON object: \(self.stdout)")
        }
        return object
    }
}
