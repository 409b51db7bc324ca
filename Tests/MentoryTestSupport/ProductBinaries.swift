import Foundation

/// Finds the package's executables (`mentoryd`, `mentoryctl`) for tests that run them as processes.
public enum ProductBinaries {
    /// Where `name` is expected: `$MENTORYD_BINARY` or `$MENTORYCTL_BINARY` when set, else the build
    /// directory holding the running test binary (or a few levels above it, for test bundles).
    public static func url(of name: String) -> URL {
        let override = ProcessInfo.processInfo.environment[name.uppercased() + "_BINARY"] ?? ""
        if !override.isEmpty { return URL(fileURLWithPath: override) }
        var directory = self.testBinary.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        return self.testBinary.deletingLastPathComponent().appendingPathComponent(name)
    }

    /// The path of `name`; throws when no executable is there.
    public static func path(of name: String) throws -> String {
        let url = self.url(of: name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw MissingProductError(name: name, expectedAt: url.path)
        }
        return url.path
    }

    private static var testBinary: URL {
        URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
        )
    }
}

/// A product the tests need was not built.
public struct MissingProductError: Error, CustomStringConvertible {
    /// The product's name.
    public var name: String
    /// Where it was looked for.
    public var expectedAt: String

    public var description: String {
        "\(self.name) was not found at \(self.expectedAt); build it (swift build) or set "
            + "\(self.name.uppercased())_BINARY"
    }
}
