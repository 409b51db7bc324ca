// mentory-storage-bench: durable `diary add` throughput through the real mentoryd, at several
// numbers of concurrent clients, next to a baseline of one plain SQLite transaction (WAL,
// synchronous=FULL, so one fsync) per entry, measured in the same run on the same disk.
//
// Build and run (release):
//   swift build -c release --product mentoryd
//   swift build -c release --product mentory-storage-bench
//   .build/release/mentory-storage-bench [--seconds 5] [--clients 1,8,64] [--dir /var/tmp]
//       [--client blocking|async] [--socket PATH]
//
// mentoryd is looked up next to this executable, or at $MENTORYD_BINARY. Each client is a thread
// with a blocking connection, as each baseline client is a thread calling SQLite; `--client async`
// drives mentoryd with MentoryClient tasks instead. `--socket PATH` measures a mentoryd already
// running there (under strace or perf, say), each row on its own dates, without the baseline.
// Not part of the test suite.

import Foundation
import GRDB
import MentoryClient
import MentoryDomain
import MentoryStorageSQLite
import MentoryWire
import Synchronization

struct Options {
    var seconds = 5.0
    var clientCounts = [1, 8, 64]
    var directory = FileManager.default.temporaryDirectory.path
    /// A running mentoryd to measure instead of starting one per row (for profiling it under
    /// strace or perf); the baseline rows are left out. Its diary must hold none of the bench's dates.
    var socket: String?
    /// How the daemon rows drive mentoryd: `blocking` (the default) gives each client a thread of its own
    /// with a ``BlockingMentoryConnection``, as the baseline gives each client a thread calling SQLite;
    /// `async` uses ``MentoryClient`` tasks over its event loop, whose own hops then count in the rows.
    var clientKind = ClientKind.blocking

    enum ClientKind: String {
        case blocking
        case async
    }

    init(arguments: [String]) throws {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--seconds":
                guard let value = iterator.next().flatMap(Double.init), value > 0 else {
                    throw BenchError("--seconds N")
                }
                self.seconds = value
            case "--clients":
                guard let list = iterator.next() else { throw BenchError("--clients 1,8,64") }
                self.clientCounts = try list.split(separator: ",").map {
                    guard let count = Int($0), count > 0 else { throw BenchError("--clients 1,8,64") }
                    return count
                }
            case "--dir":
                guard let value = iterator.next() else { throw BenchError("--dir DIRECTORY") }
                self.directory = value
            case "--client":
                guard let value = iterator.next().flatMap(ClientKind.init(rawValue:)) else {
                    throw BenchError("--client blocking|async")
                }
                self.clientKind = value
            case "--socket":
                guard let value = iterator.next() else { throw BenchError("--socket PATH") }
                self.socket = value
            default:
                throw BenchError(
                    "usage: mentory-storage-bench [--seconds S] [--clients 1,8,64] [--dir DIRECTORY] [--socket PATH] "
                        + "[--client blocking|async]")
            }
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// One row of the table.
struct Measurement {
    var setup: String
    var clients: Int
    var entries: Int
    var seconds: Double
    var latencies: [Double]

    var throughput: Double { Double(self.entries) / self.seconds }

    func percentile(_ fraction: Double) -> Double {
        guard !self.latencies.isEmpty else { return .nan }
        let sorted = self.latencies.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
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

func addRequest(_ index: Int) -> Mentory_V1_DiaryAddRequest {
    var request = Mentory_V1_DiaryAddRequest()
    request.recordDate = recordDate(index)
    request.title = "Benchmark entry \(index)"
    request.text = String(repeating: "A day worth remembering, written down before it fades. ", count: 4)
    request.emotion = .pleasant
    request.actionItems = (0..<2).map { item in
        var actionItem = Mentory_V1_ActionItem()
        actionItem.text = "Follow-up \(item) of entry \(index)"
        return actionItem
    }
    return request
}

func mentorydPath() throws -> String {
    if let path = ProcessInfo.processInfo.environment["MENTORYD_BINARY"], !path.isEmpty { return path }
    let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    let path = URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("mentoryd").path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw BenchError(
            "mentoryd not found at \(path); build it (swift build -c release --product mentoryd) or set MENTORYD_BINARY"
        )
    }
    return path
}

/// Runs mentoryd on a fresh state directory for the duration of `body`.
func withDaemon<T>(binary: String, root: String, _ body: (String) async throws -> T) async throws -> T {
    let directory = root + "/run-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let socket = directory + "/mentoryd.sock"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = ["--socket", socket, "--state-dir", directory + "/state", "--log-level", "error"]
    process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("MENTORYD_") }
    try process.run()
    defer {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
    }
    let deadline = ContinuousClock.now + .seconds(20)
    while true {
        if let client = try? await MentoryClient.connect(socketPath: socket, clientName: "bench-probe") {
            await client.close()
            break
        }
        guard process.isRunning, ContinuousClock.now < deadline else {
            throw BenchError(
                "mentoryd did not start (exit status \(process.isRunning ? -1 : process.terminationStatus))")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await body(socket)
}

/// `clients` connections, each adding entries one after another for `seconds`, made as `kind` says.
///
/// `dayOffset` (a multiple of 1000, at most 290,000) shifts the record dates, so that several rows
/// can share one running daemon.
func measureDaemon(
    socket: String, clients: Int, seconds: Double, dayOffset: Int = 0, kind: Options.ClientKind
) async throws -> Measurement {
    switch kind {
    case .blocking:
        return try measureDaemonBlocking(socket: socket, clients: clients, seconds: seconds, dayOffset: dayOffset)
    case .async:
        return try await measureDaemonAsync(socket: socket, clients: clients, seconds: seconds, dayOffset: dayOffset)
    }
}

/// The warm-up entries' first index: year 9213 on, far from the measured days, within CalendarDay's range.
func warmUpBase(dayOffset: Int) -> Int { 3_000_000 + dayOffset / 1000 }

/// `clients` threads, each with its own blocking connection (plain socket calls: no event loop or
/// task between the thread and the socket), adding entries one after another for `seconds`.
func measureDaemonBlocking(socket: String, clients: Int, seconds: Double, dayOffset: Int) throws -> Measurement {
    let clock = ContinuousClock()
    // Each thread connects and adds its warm-up entry (not counted), then waits for the start.
    let ready = DispatchGroup()
    let go = DispatchSemaphore(value: 0)
    let deadline = Mutex<ContinuousClock.Instant?>(nil)
    let results = Mutex<(latencies: [Double], error: (any Error)?)>(([], nil))
    let finished = DispatchGroup()
    for index in 0..<clients {
        ready.enter()
        finished.enter()
        Thread {
            defer { finished.leave() }
            var latencies: [Double] = []
            var next = dayOffset + index
            do {
                let connection: BlockingMentoryConnection
                do {
                    defer { ready.leave() }
                    connection = try BlockingMentoryConnection.connect(socketPath: socket, clientName: "bench-\(index)")
                    _ = try connection.diaryAdd(addRequest(warmUpBase(dayOffset: dayOffset) + index))
                }
                go.wait()
                guard let end = deadline.withLock({ $0 }) else { return }
                while clock.now < end {
                    let request = addRequest(next)
                    let before = clock.now
                    _ = try connection.diaryAdd(request)
                    latencies.append((clock.now - before).seconds * 1000)
                    next += clients
                }
                results.withLock { $0.latencies += latencies }
            } catch {
                results.withLock { $0.error = error }
            }
        }.start()
    }
    ready.wait()
    let start = clock.now
    deadline.withLock { $0 = start + .milliseconds(Int64(seconds * 1000)) }
    for _ in 0..<clients { go.signal() }
    finished.wait()
    let elapsed = (clock.now - start).seconds
    let (latencies, error) = results.withLock { ($0.latencies, $0.error) }
    if let error { throw error }
    return Measurement(
        setup: "mentoryd", clients: clients, entries: latencies.count, seconds: elapsed, latencies: latencies)
}

/// `clients` ``MentoryClient`` connections, each adding entries one after another for `seconds`.
func measureDaemonAsync(socket: String, clients: Int, seconds: Double, dayOffset: Int) async throws -> Measurement {
    let connections = try await withThrowingTaskGroup(of: MentoryClient.self) { group in
        for index in 0..<clients {
            group.addTask { try await MentoryClient.connect(socketPath: socket, clientName: "bench-\(index)") }
        }
        return try await group.reduce(into: []) { $0.append($1) }
    }
    // Warm-up: one entry per client, not counted.
    let warmUpBase = warmUpBase(dayOffset: dayOffset)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for (index, client) in connections.enumerated() {
            group.addTask { _ = try await client.diaryAdd(addRequest(warmUpBase + index)) }
        }
        try await group.waitForAll()
    }
    let clock = ContinuousClock()
    let start = clock.now
    let deadline = start + .milliseconds(Int64(seconds * 1000))
    let perClient = try await withThrowingTaskGroup(of: [Double].self) { group in
        for (index, client) in connections.enumerated() {
            group.addTask {
                var latencies: [Double] = []
                var next = dayOffset + index
                while clock.now < deadline {
                    let before = clock.now
                    _ = try await client.diaryAdd(addRequest(next))
                    latencies.append((clock.now - before).seconds * 1000)
                    next += clients
                }
                return latencies
            }
        }
        return try await group.reduce(into: []) { $0.append($1) }
    }
    let elapsed = (clock.now - start).seconds
    for client in connections { await client.close() }
    let latencies = perClient.flatMap { $0 }
    return Measurement(
        setup: "mentoryd", clients: clients, entries: latencies.count, seconds: elapsed, latencies: latencies)
}

/// One transaction (and fsync) per entry, straight into SQLite with the store's schema, from
/// `clients` threads sharing one connection (SQLite has one writer at a time anyway).
///
/// Like mentoryd's store: WAL, synchronous=FULL, the same migrations (tables and indexes), the
/// entry and its two action items in one transaction, ids made the same way. Unlike it: no
/// existence checks before the insert (mentoryd reads the id and the record date first), and no
/// socket or protobuf.
func measureBaseline(root: String, clients: Int, seconds: Double) throws -> Measurement {
    let directory = root + "/baseline-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var configuration = Configuration()
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
    let queue = try DatabaseQueue(path: directory + "/baseline.sqlite", configuration: configuration)
    _ = try queue.writeWithoutTransaction { db in try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
    try SQLiteSchema.migrator.migrate(queue)
    let clock = ContinuousClock()
    let start = clock.now
    let deadline = start + .milliseconds(Int64(seconds * 1000))
    let results = Mutex<(latencies: [Double], error: (any Error)?)>(([], nil))
    let finished = DispatchGroup()
    for client in 0..<clients {
        finished.enter()
        Thread {
            defer { finished.leave() }
            var latencies: [Double] = []
            var index = client
            do {
                while clock.now < deadline {
                    let request = addRequest(index)
                    let createdAt = Int64(Date().timeIntervalSince1970 * 1000)
                    // Ids made as mentoryd makes them (time-ordered entry ids, getrandom(2)), not
                    // with Foundation's UUID(), which opens /dev/urandom for each id on Linux.
                    let id = EntityID.timeOrdered(unixMilliseconds: createdAt)
                    let before = clock.now
                    try queue.write { db in
                        try db.execute(
                            sql: """
                                INSERT INTO diary_entry
                                    (id, record_date, created_at_unix_ms, title, text, emotion, analysis)
                                VALUES (?, ?, ?, ?, ?, ?, NULL)
                                """,
                            arguments: [
                                id, request.recordDate, createdAt, request.title, request.text,
                                request.emotion.rawValue,
                            ]
                        )
                        for (position, item) in request.actionItems.enumerated() {
                            try db.execute(
                                sql: """
                                    INSERT INTO diary_action_item (entry_id, position, id, text, done)
                                    VALUES (?, ?, ?, ?, 0)
                                    """,
                                arguments: [id, position, EntityID.random(), item.text]
                            )
                        }
                    }
                    latencies.append((clock.now - before).seconds * 1000)
                    index += clients
                }
                results.withLock { $0.latencies += latencies }
            } catch {
                results.withLock { $0.error = error }
            }
        }.start()
    }
    finished.wait()
    let elapsed = (clock.now - start).seconds
    try queue.close()
    let (latencies, error) = results.withLock { ($0.latencies, $0.error) }
    if let error { throw error }
    return Measurement(
        setup: "baseline: 1 SQLite txn+fsync per entry", clients: clients, entries: latencies.count,
        seconds: elapsed, latencies: latencies)
}

extension Duration {
    var seconds: Double {
        Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
    }
}

func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? padding + text : text + padding
}

let options = try Options(arguments: CommandLine.arguments)
// Each mentoryd row is measured right before its baseline row, so that a ratio compares runs made
// under the same disk and CPU conditions (on a shared machine, fsync latency drifts within seconds).
var daemonRows: [Measurement] = []
var baselineRows: [Measurement] = []
if let socket = options.socket {
    for (row, clients) in options.clientCounts.enumerated() {
        daemonRows.append(
            try await measureDaemon(
                socket: socket, clients: clients, seconds: options.seconds, dayOffset: row * 200_000,
                kind: options.clientKind))
    }
} else {
    let binary = try mentorydPath()
    for clients in options.clientCounts {
        daemonRows.append(
            try await withDaemon(binary: binary, root: options.directory) { socket in
                try await measureDaemon(
                    socket: socket, clients: clients, seconds: options.seconds, kind: options.clientKind)
            })
        baselineRows.append(try measureBaseline(root: options.directory, clients: clients, seconds: options.seconds))
    }
}
let rows = daemonRows + baselineRows

print("durable diary add (WAL, synchronous=FULL), \(options.seconds) s per row, files under \(options.directory)")
print(
    "| \(pad("setup", 40)) | \(pad("clients", 7, right: true)) | \(pad("entries", 8, right: true)) | \(pad("entries/s", 10, right: true)) | \(pad("p50 ms", 8, right: true)) | \(pad("p99 ms", 8, right: true)) |"
)
print(
    "|\(String(repeating: "-", count: 42))|\(String(repeating: "-", count: 8)):|\(String(repeating: "-", count: 9)):|\(String(repeating: "-", count: 11)):|\(String(repeating: "-", count: 9)):|\(String(repeating: "-", count: 9)):|"
)
for row in rows {
    print(
        "| \(pad(row.setup, 40)) | \(pad(String(row.clients), 7, right: true)) | \(pad(String(row.entries), 8, right: true)) | "
            + "\(pad(String(format: "%.0f", row.throughput), 10, right: true)) | "
            + "\(pad(String(format: "%.2f", row.percentile(0.5)), 8, right: true)) | "
            + "\(pad(String(format: "%.2f", row.percentile(0.99)), 8, right: true)) |"
    )
}
