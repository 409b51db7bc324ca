import Foundation

/// The log `powercut_shim.c` writes: every operation a process made under one directory tree that
/// decides what a disk holds after a power cut, in the order they happened.
struct PowerCutLog {
    /// One recorded operation.
    enum Operation {
        case create(inode: UInt64, path: String)
        case openExisting(inode: UInt64, path: String)
        /// Data written at `offset`: the bytes `data` of the log.
        case write(inode: UInt64, offset: Int, data: Range<Int>)
        case truncate(inode: UInt64, size: Int)
        case syncFile(inode: UInt64)
        case syncDirectory(path: String)
        /// A sync the shim turned into a no-op (`MENTORY_POWERCUT_MODE=nosync`).
        case suppressedSync
        case makeDirectory(path: String)
        case remove(path: String)
        case rename(from: String, to: String)
        case link(from: String, to: String)

        /// Whether a power cut right after this operation is a cut point: the syncs.
        var isSync: Bool {
            switch self {
            case .syncFile, .syncDirectory, .suppressedSync: true
            default: false
            }
        }
    }

    /// An operation and where its record ends in the log (so that a log length read at some moment
    /// tells which operations happened before it).
    struct Record {
        var operation: Operation
        var end: Int
    }

    let bytes: [UInt8]
    let records: [Record]

    /// Parses the log at `path`; a record cut short at the end (the process was killed while the
    /// shim wrote it) is left out.
    init(path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var records: [Record] = []
        var cursor = 0
        while cursor < bytes.count {
            guard let newline = bytes[cursor...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            let fields = String(decoding: bytes[cursor..<newline], as: UTF8.self)
                .split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            cursor = newline + 1
            func number(_ index: Int) throws -> Int {
                guard index < fields.count, let value = Int(fields[index]) else {
                    throw CrashTestError("power-cut log: bad record \(fields)")
                }
                return value
            }
            func inode() throws -> UInt64 { UInt64(try number(1)) }
            func text(_ index: Int) throws -> String {
                guard index < fields.count else { throw CrashTestError("power-cut log: bad record \(fields)") }
                return fields[index]
            }
            let operation: Operation
            switch fields.first {
            case "C": operation = .create(inode: try inode(), path: try text(2))
            case "O": operation = .openExisting(inode: try inode(), path: try text(2))
            case "W":
                let count = try number(3)
                guard cursor + count <= bytes.count else { cursor = bytes.count; continue }
                operation = .write(inode: try inode(), offset: try number(2), data: cursor..<(cursor + count))
                cursor += count
            case "T": operation = .truncate(inode: try inode(), size: try number(2))
            case "S": operation = .syncFile(inode: try inode())
            case "D": operation = .syncDirectory(path: try text(1))
            case "N": operation = .suppressedSync
            case "M": operation = .makeDirectory(path: try text(1))
            case "U": operation = .remove(path: try text(1))
            case "R": operation = .rename(from: try text(1), to: try text(2))
            case "L": operation = .link(from: try text(1), to: try text(2))
            default: throw CrashTestError("power-cut log: unknown record \(fields)")
            }
            records.append(Record(operation: operation, end: cursor))
        }
        self.bytes = bytes
        self.records = records
    }

    /// The indexes of the records that are cut points (syncs), in order.
    var cutPoints: [Int] {
        self.records.indices.filter { self.records[$0].operation.isSync }
    }
}

/// What a disk holds after a crash, replayed from a ``PowerCutLog``.
///
/// **The model** (a disk that keeps exactly what was synced, the strictest POSIX reading):
/// - A file's data (its writes and truncations, from any descriptor) reach the disk only when the
///   file is synced (`fsync` or `fdatasync`: both make its size durable too); a sync makes
///   durable everything written to the file before it. Unsynced data are all lost: no torn or
///   partial writes are modelled, and no unsynced write survives.
/// - A directory's entries (files created, removed, renamed or linked in it, and directories made
///   in it) reach the disk only when that directory is synced; the sync makes durable the
///   directory's whole list of entries as it stands then. An entry that is not durable is gone,
///   with its file, whatever was synced of the file itself.
/// - The root directory and its place in its parent are durable (the test made it before the run).
///
/// ``Crash/processKill`` is the other crash: the process dies but the kernel keeps its page cache,
/// so every operation made before the cut is there.
struct DiskModel {
    enum Crash {
        case powerCut
        case processKill
    }

    private enum Node: Equatable {
        case file(Int)
        case directory
    }

    private struct FileObject {
        var current: [UInt8] = []
        var durable: [UInt8] = []
    }

    private let root: String
    private var objects: [FileObject] = []
    private var inodes: [UInt64: Int] = [:]
    /// Every path under the root as it stands now (the root itself excluded).
    private var live: [String: Node] = [:]
    /// Each synced directory's entries (name to node) as of its last sync.
    private var durableEntries: [String: [String: Node]] = [:]

    /// A model of the directory `root` (canonical, as the shim logs it), empty when the run began.
    init(root: String) {
        self.root = root
        self.durableEntries[root] = [:]
    }

    private static func parent(of path: String) -> String {
        String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
    }

    private static func name(of path: String) -> String {
        String(path[path.index(after: path.lastIndex(of: "/") ?? path.startIndex)...])
    }

    private func object(_ inode: UInt64) throws -> Int {
        guard let object = self.inodes[inode] else {
            throw CrashTestError("power-cut log: inode \(inode) was never created during the run")
        }
        return object
    }

    /// Applies one operation of `log`.
    mutating func apply(_ operation: PowerCutLog.Operation, of log: PowerCutLog) throws {
        switch operation {
        case .create(let inode, let path):
            self.objects.append(FileObject())
            self.inodes[inode] = self.objects.count - 1
            self.live[path] = .file(self.objects.count - 1)
        case .openExisting(let inode, let path):
            // Only files made during the run: anything else was not in the (empty) starting state.
            guard case .file(let object) = self.live[path], self.inodes[inode] == object else {
                throw CrashTestError("power-cut log: \(path) was opened but not created during the run")
            }
        case .write(let inode, let offset, let data):
            let object = try self.object(inode)
            let end = offset + data.count
            if self.objects[object].current.count < end {
                self.objects[object].current.append(
                    contentsOf: repeatElement(0, count: end - self.objects[object].current.count))
            }
            self.objects[object].current.replaceSubrange(offset..<end, with: log.bytes[data])
        case .truncate(let inode, let size):
            let object = try self.object(inode)
            let count = self.objects[object].current.count
            if size < count {
                self.objects[object].current.removeLast(count - size)
            } else {
                self.objects[object].current.append(contentsOf: repeatElement(0, count: size - count))
            }
        case .syncFile(let inode):
            let object = try self.object(inode)
            self.objects[object].durable = self.objects[object].current
        case .syncDirectory(let path):
            var entries: [String: Node] = [:]
            for (child, node) in self.live where Self.parent(of: child) == path {
                entries[Self.name(of: child)] = node
            }
            self.durableEntries[path] = entries
        case .suppressedSync:
            break
        case .makeDirectory(let path):
            self.live[path] = .directory
        case .remove(let path):
            self.live[path] = nil
        case .rename(let from, let to):
            guard let node = self.live[from], node != .directory else {
                throw CrashTestError("power-cut log: rename of \(from), which the model does not follow")
            }
            self.live[from] = nil
            self.live[to] = node
        case .link(let from, let to):
            guard let node = self.live[from], node != .directory else {
                throw CrashTestError("power-cut log: link of \(from), which the model does not follow")
            }
            self.live[to] = node
        }
    }

    /// Writes what the disk holds after `crash` under `target` (an existing empty directory standing
    /// for the root), and returns a digest of it (equal digests, equal trees).
    func materialize(_ crash: Crash, into target: String) throws -> Int {
        var hasher = Hasher()
        var files: [(String, Node)] = []
        switch crash {
        case .processKill:
            files = self.live.map { ($0.key, $0.value) }
        case .powerCut:
            var pending = [self.root]
            while let directory = pending.popLast() {
                for (name, node) in self.durableEntries[directory] ?? [:] {
                    let path = directory + "/" + name
                    files.append((path, node))
                    if node == .directory { pending.append(path) }
                }
            }
        }
        // Parents before children.
        files.sort { $0.0.count < $1.0.count || ($0.0.count == $1.0.count && $0.0 < $1.0) }
        for (path, node) in files {
            let relative = String(path.dropFirst(self.root.count))
            let destination = target + relative
            hasher.combine(relative)
            switch node {
            case .directory:
                try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: false)
            case .file(let object):
                let content = crash == .powerCut ? self.objects[object].durable : self.objects[object].current
                hasher.combine(content)
                guard FileManager.default.createFile(atPath: destination, contents: Data(content)) else {
                    throw CrashTestError("cannot write \(destination)")
                }
            }
        }
        return hasher.finalize()
    }
}
