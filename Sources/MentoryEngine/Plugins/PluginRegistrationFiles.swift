#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif
import MentoryWire

/// Where the engine keeps each declared plugin's last successful registration, so that its
/// namespace (methods, topics, descriptors) is known across daemon restarts before the plugin
/// registers again.
///
/// One file per plugin, `<directory>/<name>.registration`, holding the `PluginRegisterRequest` as
/// the plugin sent it (binary protobuf). Each file is replaced atomically: written to a temporary
/// file, flushed, renamed over the old one, and the directory flushed, so a power cut leaves the old
/// registration or the new one. A file that cannot be read or no longer validates is ignored (and
/// logged): the plugin's next registration replaces it.
public struct PluginRegistrationFiles: Sendable {
    /// The directory the files live in, e.g. `<state.directory>/plugins`; created (mode 0700) on first write.
    public var directory: String

    /// Keeps the registrations in `directory`.
    public init(directory: String) {
        self.directory = directory
    }

    /// The largest registration file read: a registration arrives in one frame, far smaller.
    static let maxFileBytes = 16 << 20

    func path(of plugin: String) -> String {
        self.directory + "/" + plugin + ".registration"
    }

    /// The last registration saved for `plugin`; `nil` when there is none.
    func load(_ plugin: String) throws -> Mentory_V1_PluginRegisterRequest? {
        let path = self.path(of: plugin)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        guard data.count <= Self.maxFileBytes else {
            throw RegistrationFileError(path: path, reason: "it is larger than \(Self.maxFileBytes) bytes")
        }
        return try Mentory_V1_PluginRegisterRequest(serializedBytes: data)
    }

    /// Saves `request` as `plugin`'s last registration, atomically.
    func save(_ request: Mentory_V1_PluginRegisterRequest, for plugin: String) throws {
        let bytes: [UInt8] = try request.serializedBytes()
        try FileManager.default.createDirectory(
            atPath: self.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let target = self.path(of: plugin)
        let temporary = target + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw RegistrationFileError(path: temporary, errno: errno) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                write(descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                let error = RegistrationFileError(path: temporary, errno: errno)
                close(descriptor)
                unlink(temporary)
                throw error
            }
            written += count
        }
        guard fsync(descriptor) == 0 else {
            let error = RegistrationFileError(path: temporary, errno: errno)
            close(descriptor)
            unlink(temporary)
            throw error
        }
        close(descriptor)
        guard rename(temporary, target) == 0 else {
            let error = RegistrationFileError(path: target, errno: errno)
            unlink(temporary)
            throw error
        }
        let directory = open(self.directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw RegistrationFileError(path: self.directory, errno: errno) }
        defer { close(directory) }
        guard fsync(directory) == 0 else { throw RegistrationFileError(path: self.directory, errno: errno) }
    }
}

/// A registration file that could not be read or written.
struct RegistrationFileError: Error, CustomStringConvertible {
    var path: String
    var reason: String

    init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    init(path: String, errno code: Int32) {
        self.init(path: path, reason: String(cString: strerror(code)))
    }

    var description: String { "\(self.path): \(self.reason)" }
}
