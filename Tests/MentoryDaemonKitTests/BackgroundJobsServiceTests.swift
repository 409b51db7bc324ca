import Foundation
import Logging
import MentoryHandlerKit
import MentoryWire
import NIOConcurrencyHelpers
import ServiceLifecycle
import Testing

@testable import MentoryDaemonKit
@testable import MentoryStorageAdmin

/// What the services and the jobs did, in order.
private final class Events: Sendable {
    let list = NIOLockedValueBox<[String]>([])
    let started: AsyncStream<Void>
    private let startedContinuation: AsyncStream<Void>.Continuation

    init() {
        (self.started, self.startedContinuation) = AsyncStream.makeStream(of: Void.self)
    }

    func append(_ event: String) {
        self.list.withLockedValue { $0.append(event) }
        if event == "submitter started" { self.startedContinuation.finish() }
    }
}

/// A service that submits a job as it stops, as the server's closing connections do (a handler's
/// `connectionClosed` releasing what the connection held).
private struct SubmittingService: Service {
    let jobs: BackgroundJobs
    let events: Events

    func run() async throws {
        self.events.append("submitter started")
        try? await gracefulShutdown()
        let events = self.events
        do {
            try self.jobs.submit {
                // Yield a little, so that a runner that did not wait would be gone by now.
                for _ in 0..<100 { await Task.yield() }
                events.append("job ran")
            }
        } catch {
            events.append("refused: \(error)")
        }
        self.events.append("submitter stopped")
    }
}

@Suite("The background jobs' service", .timeLimit(.minutes(1)))
struct BackgroundJobsServiceTests {
    /// Runs the jobs' service and then the submitter in a group, which shuts down gracefully once the submitter
    /// started.
    private static func runThenShutDown(_ service: BackgroundJobsService, _ submitter: SubmittingService) async throws {
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: service), .init(service: submitter)], logger: Logger(label: "test")))
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask { try await group.run() }
            for await _ in submitter.events.started {}
            await group.triggerGracefulShutdown()
        }
    }

    @Test("started first, it outlives the services that submit jobs: a job submitted as they stop still runs")
    func outlivesSubmitters() async throws {
        let jobs = BackgroundJobs()
        let events = Events()
        try await Self.runThenShutDown(BackgroundJobsService(jobs), SubmittingService(jobs: jobs, events: events))
        #expect(events.list.withLockedValue { $0 } == ["submitter started", "submitter stopped", "job ran"])
        #expect(jobs.isStopped)
        let refusal = #expect(throws: BackgroundJobs.Refusal.self) { try jobs.submit {} }
        #expect(refusal?.reason == .stopped)
    }

    @Test("on shut-down it waits for what must finish first (the engine's tasks), which may still submit jobs")
    func finishesFirst() async throws {
        let jobs = BackgroundJobs()
        let events = Events()
        let service = BackgroundJobsService(jobs) {
            events.append("finishing first")
            // What a request finishing at shut-down does: the jobs have not stopped, so this runs.
            do {
                try jobs.submit { events.append("job ran") }
            } catch {
                events.append("refused: \(error)")
            }
        }
        try await Self.runThenShutDown(service, SubmittingService(jobs: jobs, events: events))
        let list = events.list.withLockedValue { $0 }
        #expect(list.filter { $0.hasPrefix("refused") }.isEmpty, "\(list)")
        #expect(list.firstIndex(of: "submitter stopped")! < list.firstIndex(of: "finishing first")!, "\(list)")
        #expect(list.filter { $0 == "job ran" }.count == 2, "\(list)")
        #expect(jobs.isStopped)
    }

    @Test("a job submitted before the group runs the service waits in the queue, rather than being refused")
    func queuedBeforeStart() async throws {
        let jobs = BackgroundJobs()
        let service = BackgroundJobsService(jobs)
        let ran = Events()
        try jobs.submit { ran.append("job ran") }
        jobs.stop()
        await service.run()
        #expect(ran.list.withLockedValue { $0 } == ["job ran"])
    }
}

/// A store whose backup is a one-byte file.
private struct OneByteStore: StorageBackupTarget {
    func writeBackup(to path: String) async throws(MentoryError) -> Int {
        guard FileManager.default.createFile(atPath: path, contents: Data([1])) else {
            throw .storageFailure("cannot write \(path)")
        }
        return 1
    }
}

@Suite("The storage handler's background work", .timeLimit(.minutes(1)))
struct StorageAdminJobsTests {
    @Test("an unread backup snapshot is removed at its idle timeout, by a timer of the background jobs")
    func snapshotExpires() async throws {
        let directory = NSTemporaryDirectory() + "/snapshot-expiry-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let snapshots = BackupSnapshots(directory: directory, maxFrameLength: 1 << 20, idleTimeout: .milliseconds(1))
        let jobs = BackgroundJobs(shutdownDeadline: .seconds(3600))
        jobs.expectRunner()
        _ = try await snapshots.create(for: ConnectionID(1), from: OneByteStore(), jobs: jobs)
        #expect(await snapshots.count == 1)
        // Stopped before it runs, the runner still runs the timer, whose deadline comes well within the
        // shut-down's: once it returns, the timer has fired.
        jobs.stop()
        await jobs.run()
        #expect(await snapshots.count == 0)
        #expect(BackupSnapshots.leftoverFiles(in: directory).isEmpty)
    }
}
