import ArgumentParser
import Foundation
import MentoryClient
import MentoryDomain
import MentoryWire
import SwiftProtobuf

/// `mentoryctl diary export`: every entry as JSON Lines (one proto3-JSON `DiaryEntry` per line),
/// newest day first.
struct DiaryExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write every diary entry as JSON Lines, newest day first.",
        discussion: """
            Each line is one DiaryEntry in proto3 JSON, with its id, creation time and action items, \
            so that `mentoryctl diary import` restores it exactly. With --output the file is written \
            whole or not at all (mode 0600); otherwise the lines go to standard output and the summary \
            to standard error.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Option(name: .customLong("output"), help: "Write to this file instead of standard output.")
    var output: String?

    func run() async throws {
        try await self.options.withClient { client in
            let sink = try ExportSink(path: self.output)
            var count = 0
            do {
                var before: String?
                while true {
                    // A page holds at most pageSize entries and no more than fit one frame; the
                    // daemon's cursor says where the next one starts.
                    let page = try await client.diaryListPage(limit: UInt32(Self.pageSize), before: before)
                    var chunk = ""
                    for entry in page.entries {
                        chunk += try entry.jsonString(options: Output.jsonOptions)
                        chunk += "\n"
                    }
                    try sink.write(chunk)
                    count += page.entries.count
                    guard page.hasNextBefore, !page.entries.isEmpty else { break }
                    before = page.nextBefore
                }
                try sink.finish()
            } catch {
                sink.abandon()
                throw error
            }
            Self.report(count: count, output: self.output, json: self.options.json)
        }
    }

    /// The most entries asked for per `list`.
    static let pageSize = 1000

    private static func report(count: Int, output: String?, json: Bool) {
        let text: String
        if json {
            var fields = #"{"exported":\#(count)"#
            if let output { fields += #","output":\#(Output.json(Google_Protobuf_StringValue(output)))"# }
            text = fields + "}"
        } else {
            text = "Exported \(count) \(count == 1 ? "entry" : "entries")" + (output.map { " to \($0)" } ?? "") + "."
        }
        if output == nil {
            // Standard output holds the entries; the summary goes beside them.
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
        }
    }
}

/// Where exported lines go: standard output, or a temporary file renamed over `path` at the end.
private final class ExportSink {
    private let handle: FileHandle
    private let path: String?
    private let temporaryPath: String?

    init(path: String?) throws {
        guard let path else {
            self.handle = FileHandle.standardOutput
            self.path = nil
            self.temporaryPath = nil
            return
        }
        let temporary = path + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
        guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: temporary)
        else {
            throw TransferError("cannot create \(temporary): check that its directory exists and is writable")
        }
        self.handle = handle
        self.path = path
        self.temporaryPath = temporary
    }

    func write(_ text: String) throws {
        guard !text.isEmpty else { return }
        try self.handle.write(contentsOf: Data(text.utf8))
    }

    /// Makes the file durable and gives it its name.
    func finish() throws {
        guard let path, let temporaryPath else { return }
        try self.handle.synchronize()
        try self.handle.close()
        if rename(temporaryPath, path) != 0 {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: temporaryPath)
            throw TransferError("cannot move the export to \(path): \(reason)")
        }
        // The new name is durable only once its directory is synced (a power cut would take it back).
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0, fsync(directoryDescriptor) == 0 else {
            let reason = String(cString: strerror(errno))
            if directoryDescriptor >= 0 { close(directoryDescriptor) }
            throw TransferError("the export is at \(path), but syncing \(directory) to the disk failed: \(reason)")
        }
        close(directoryDescriptor)
    }

    func abandon() {
        guard let temporaryPath else { return }
        try? self.handle.close()
        try? FileManager.default.removeItem(atPath: temporaryPath)
    }
}

/// `mentoryctl diary import`: adds the entries of a JSON Lines export, keeping their ids.
struct DiaryImport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add the entries of a JSON Lines export; importing the same file twice changes nothing.",
        discussion: """
            Reads one DiaryEntry (proto3 JSON) per line; blank lines are skipped. Every line is checked \
            before anything is sent: a file with an unreadable line imports nothing. Entries keep their \
            ids, creation times and action items. An entry already present with the same content is left \
            as it is; a different entry with the same id or the same day is reported as a conflict, and \
            the command then exits with status 1 after importing the rest.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Option(name: .customLong("input"), help: "Read this file instead of standard input.")
    var input: String?

    @Option(help: "Entries sent at once (1-256).")
    var concurrency: Int = 16

    func validate() throws {
        guard (1...256).contains(self.concurrency) else {
            throw ValidationError("--concurrency must be between 1 and 256")
        }
    }

    /// What happened to one line.
    enum Outcome: Sendable {
        case added
        case unchanged
        case failed(String)
    }

    func run() async throws {
        let entries: [(line: Int, entry: Mentory_V1_DiaryEntry)]
        do {
            entries = try Self.parse(try self.readInput())
        } catch let error as TransferError {
            Output.error(error.description)
            throw ExitCode.failure
        }
        let concurrency = self.concurrency
        try await self.options.withClient { client in
            var outcomes: [(line: Int, entry: Mentory_V1_DiaryEntry, outcome: Outcome)] = []
            try await withThrowingTaskGroup(of: (Int, Mentory_V1_DiaryEntry, Outcome).self) { group in
                var next = entries.makeIterator()
                func startNext() {
                    guard let item = next.next() else { return }
                    group.addTask { (item.line, item.entry, try await Self.importEntry(item.entry, client: client)) }
                }
                for _ in 0..<concurrency { startNext() }
                while let result = try await group.next() {
                    outcomes.append(result)
                    startNext()
                }
            }
            outcomes.sort { $0.line < $1.line }
            var added = 0
            var unchanged = 0
            var failed = 0
            for (line, entry, outcome) in outcomes {
                switch outcome {
                case .added: added += 1
                case .unchanged: unchanged += 1
                case .failed(let reason):
                    failed += 1
                    Output.error("line \(line) (\(entry.recordDate), id \(entry.id)): \(reason)")
                }
            }
            if self.options.json {
                print(#"{"added":\#(added),"unchanged":\#(unchanged),"failed":\#(failed)}"#)
            } else {
                print(
                    "Imported \(entries.count) \(entries.count == 1 ? "entry" : "entries"): \(added) added, \(unchanged) already present, \(failed) failed."
                )
            }
            if failed > 0 { throw ExitCode.failure }
        }
    }

    /// Adds `entry` unless it is already there; conflicts and refusals become `.failed`.
    static func importEntry(_ entry: Mentory_V1_DiaryEntry, client: MentoryClient) async throws -> Outcome {
        let existing: Mentory_V1_DiaryEntry?
        do {
            existing = try await client.diaryGet(id: entry.id)
        } catch {
            guard error.remoteCode == .notFound else { throw error }
            existing = nil
        }
        if let existing {
            return existing == Self.canonical(entry)
                ? .unchanged
                : .failed("a different entry with this id exists in the diary; delete it first to replace it")
        }
        var request = Mentory_V1_DiaryAddRequest()
        request.id = entry.id
        request.recordDate = entry.recordDate
        request.createdAtUnixMs = entry.createdAtUnixMs
        request.title = entry.title
        request.text = entry.text
        request.emotion = entry.emotion
        if entry.hasAnalysis { request.analysis = entry.analysis }
        request.actionItems = entry.actionItems
        do {
            _ = try await client.diaryAdd(request)
            return .added
        } catch {
            switch error.remoteCode {
            case .conflict?, .invalidArgument?:
                return .failed(Self.remoteMessage(error))
            default:
                throw error
            }
        }
    }

    /// `entry` as the daemon stores it: its id and its action items' UUID ids in lowercase.
    static func canonical(_ entry: Mentory_V1_DiaryEntry) -> Mentory_V1_DiaryEntry {
        var entry = entry
        entry.id = EntityID.normalized(entry.id)
        for index in entry.actionItems.indices {
            entry.actionItems[index].id = EntityID.normalized(entry.actionItems[index].id)
        }
        return entry
    }

    private static func remoteMessage(_ error: MentoryClientError) -> String {
        if case .remote(_, let message, _) = error { return message }
        return error.description
    }

    private func readInput() throws -> Data {
        if let input {
            guard let data = FileManager.default.contents(atPath: input) else {
                throw TransferError("cannot read \(input): check that it exists and is readable")
            }
            return data
        }
        return FileHandle.standardInput.readDataToEndOfFile()
    }

    /// The entries of a JSON Lines text, with their line numbers; throws on the first bad lines.
    static func parse(_ data: Data) throws -> [(line: Int, entry: Mentory_V1_DiaryEntry)] {
        guard let text = String(data: data, encoding: .utf8) else {
            throw TransferError("the input is not UTF-8 text")
        }
        var options = JSONDecodingOptions()
        options.ignoreUnknownFields = true
        var entries: [(line: Int, entry: Mentory_V1_DiaryEntry)] = []
        var problems: [String] = []
        var ids = Set<String>()
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { continue }
            do {
                let entry = try Mentory_V1_DiaryEntry(jsonString: trimmed, options: options)
                guard !entry.id.isEmpty else {
                    problems.append("line \(index + 1): the entry has no id")
                    continue
                }
                guard ids.insert(EntityID.normalized(entry.id)).inserted else {
                    problems.append("line \(index + 1): id \(entry.id) appears twice in the input")
                    continue
                }
                entries.append((index + 1, entry))
            } catch {
                problems.append("line \(index + 1): not a diary entry in JSON (\(error))")
            }
        }
        guard problems.isEmpty else {
            let shown = problems.prefix(10).joined(separator: "\n")
            let more = problems.count > 10 ? "\n… and \(problems.count - 10) more" : ""
            throw TransferError("nothing was imported:\n\(shown)\(more)")
        }
        return entries
    }
}

/// `mentoryctl backup --to PATH`: a consistent copy of the daemon's database, made while it serves.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the daemon's database to a new file while it keeps serving.",
        discussion: """
            The daemon takes a consistent snapshot (SQLite's online backup) and streams it over the \
            socket; mentoryctl writes it with your rights (mode 0600) to a temporary file beside PATH, \
            checks its size and SQLite header, syncs it to the disk and only then gives it its name. \
            PATH must not exist yet: a backup never overwrites a file. Root or the daemon's own user \
            only. To restore, stop mentoryd and put the copy in its state directory as mentoryd.sqlite.
            """
    )

    @ParentCommand var mentoryctl: Mentoryctl
    var options: ClientOptions { self.mentoryctl.options }

    @Option(name: .customLong("to"), help: "The copy's path (relative paths start at the current directory).")
    var destination: String

    func run() async throws {
        let path =
            self.destination.hasPrefix("/")
            ? self.destination
            : FileManager.default.currentDirectoryPath + "/" + self.destination
        try await self.options.withClient { client in
            let summary: Summary
            do {
                summary = try await Self.download(from: client, to: path)
            } catch let error as MentoryClientError where error.remoteCode == .unknownNamespace {
                throw TransferError(
                    "this daemon keeps its data in memory (storage.backend = memory); there is nothing to back up")
            }
            if self.options.json {
                print(
                    "{\"destination\":\(Output.json(Google_Protobuf_StringValue(path))),"
                        + "\"bytes\":\(summary.bytes),\"diaryEntries\":\(summary.diaryEntries)}"
                )
            } else {
                let entries = "\(summary.diaryEntries) diary \(summary.diaryEntries == 1 ? "entry" : "entries")"
                print("Backed up \(entries) (\(summary.bytes) bytes) to \(path).")
            }
        }
    }

    /// What a finished backup holds.
    struct Summary: Equatable {
        var bytes: UInt64
        var diaryEntries: UInt32
    }

    /// The first 16 bytes of every SQLite database file.
    static let sqliteHeader = Array("SQLite format 3\u{0}".utf8)

    /// Streams a snapshot of the daemon's database into a new file at `path` (absolute).
    ///
    /// Writes `.NAME.partial-N` beside `path` (mode 0600), checks its size against the snapshot's
    /// and its SQLite header, syncs it, then links it to `path` (which fails rather than replace an
    /// existing file) and syncs the directory. On any failure the partial file is removed.
    static func download(from client: MentoryClient, to path: String) async throws -> Summary {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let name = String(path.split(separator: "/").last ?? "")
        var info = stat()
        guard !name.isEmpty, stat(directory.isEmpty ? "/" : directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR
        else {
            throw TransferError("the directory of \(path) does not exist; create it first")
        }
        guard lstat(path, &info) != 0 else {
            throw TransferError("\(path) already exists; a backup never overwrites a file, choose a new name")
        }
        let partial = "\(directory)/.\(name).partial-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw TransferError("cannot create \(partial): \(String(cString: strerror(errno)))")
        }
        // After the link below the partial name is a second name for the copy; either way it goes.
        defer {
            close(descriptor)
            unlink(partial)
        }
        let snapshot = try await client.call(MentorySchema.Storage.backup, Mentory_V1_StorageBackupRequest())
        var offset: UInt64 = 0
        var header: [UInt8] = []
        while true {
            var request = Mentory_V1_StorageBackupReadRequest()
            request.offset = offset
            let piece = try await client.call(MentorySchema.Storage.backupRead, request)
            guard piece.data.count <= max(Int(snapshot.chunkBytes), 1),
                offset + UInt64(piece.data.count) <= snapshot.bytes
            else {
                throw TransferError(
                    "mentoryd sent more than the \(snapshot.bytes) bytes it announced; nothing was written")
            }
            if header.count < Self.sqliteHeader.count {
                header += piece.data.prefix(Self.sqliteHeader.count - header.count)
            }
            try Self.writeAll(piece.data, to: descriptor, path: partial)
            offset += UInt64(piece.data.count)
            if piece.end { break }
            guard !piece.data.isEmpty else {
                throw TransferError("mentoryd stopped sending the backup at byte \(offset); nothing was written")
            }
        }
        guard offset == snapshot.bytes, fstat(descriptor, &info) == 0, UInt64(info.st_size) == snapshot.bytes else {
            throw TransferError(
                "the copy has \(offset) bytes but mentoryd announced \(snapshot.bytes); nothing was written")
        }
        guard header == Self.sqliteHeader else {
            throw TransferError("the copy does not start with a SQLite header; nothing was written")
        }
        guard fsync(descriptor) == 0 else {
            throw TransferError("cannot sync \(partial) to the disk: \(String(cString: strerror(errno)))")
        }
        // link(2) never replaces an existing file, unlike rename(2): a file that appeared meanwhile wins.
        guard link(partial, path) == 0 else {
            let code = errno
            if code == EEXIST {
                throw TransferError("\(path) already exists; a backup never overwrites a file, choose a new name")
            }
            throw TransferError("cannot create \(path): \(String(cString: strerror(code)))")
        }
        let directoryDescriptor = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
        return Summary(bytes: snapshot.bytes, diaryEntries: snapshot.diaryEntries)
    }

    private static func writeAll(_ data: Data, to descriptor: Int32, path: String) throws {
        try data.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let count = write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    throw TransferError("cannot write \(path): \(String(cString: strerror(errno)))")
                }
                written += count
            }
        }
    }
}

/// A failure of export or import, with what to do about it.
struct TransferError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
