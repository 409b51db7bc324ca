import Foundation
import PackagePlugin

/// Writes a handler package's generated Swift code into the package, so that its builds need no code
/// generator: the command-plugin route, as grpc-swift 2's `generate-grpc-code-from-protos`.
///
/// Run in the handler package:
///
///     swift package --allow-writing-to-package-directory generate-mentory-schema [--target T ...]
///
/// For each Swift target (or each `--target`) whose folder holds `.proto` files, and for each
/// `NAME.proto` there (at `DIR/NAME.proto`: `DIR_NAME`), it runs the same `protoc` command as the
/// build plugin `MentorySchemaPlugin` and writes `NAME.pb.swift` and `NAME.schema.swift` into the
/// target's `Generated` folder, each headed by a comment saying how to regenerate it. It removes the
/// `.swift` files of `Generated` that it did not write (those of a deleted `.proto`).
///
/// The target must not also list `MentorySchemaPlugin`, which would declare everything twice; it
/// excludes its `.proto` files (`exclude: ["gratitude.proto"]`), which this plugin finds on disk.
///
/// The protoc command, and the search for protoc and for mentoryd's `.proto` folders, are the build
/// plugin's: both use `MentoryProtoc` (`Plugins/PluginsShared`).
@main
struct GenerateMentorySchema: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var extractor = ArgumentExtractor(arguments)
        let names = extractor.extractOption(named: "target")
        guard extractor.remainingArguments.isEmpty else {
            throw GenerateMentorySchemaError.usage(extractor.remainingArguments.joined(separator: " "))
        }
        let targets: [SwiftSourceModuleTarget]
        if names.isEmpty {
            targets = context.package.targets.compactMap { $0 as? SwiftSourceModuleTarget }
                .filter { !Self.protos(in: $0.directoryURL).isEmpty }
            guard !targets.isEmpty else {
                Diagnostics.warning("generate-mentory-schema: no Swift target holds a .proto file")
                return
            }
        } else {
            targets = try names.map { name in
                guard let target = context.package.targets.first(where: { $0.name == name }) else {
                    throw GenerateMentorySchemaError.noTarget(name)
                }
                guard let swift = target as? SwiftSourceModuleTarget else {
                    throw GenerateMentorySchemaError.notSwift(name)
                }
                return swift
            }
        }
        for target in targets {
            try generate(target, context: context)
        }
    }

    private func generate(_ target: SwiftSourceModuleTarget, context: PluginContext) throws {
        let protos = Self.protos(in: target.directoryURL)
        guard !protos.isEmpty else {
            Diagnostics.warning("generate-mentory-schema: target '\(target.name)' holds no .proto file")
            return
        }
        let command = try MentoryProtoc(tool: "generate-mentory-schema", context: context, target: target)
        let output = context.pluginWorkDirectoryURL.appending(path: target.name)
        try? FileManager.default.removeItem(at: output)
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)

        let process = Process()
        process.executableURL = command.protoc
        process.arguments = command.arguments(compiling: protos, into: output)
        // SwiftPM closes a command plugin's standard input. protoc started without one would take descriptor 0 for
        // the pipe to its own plugin and then close it, so protoc-gen-swift would read a bad descriptor (EBADF),
        // whenever nothing else in this process happened to hold descriptor 0: it gets /dev/null instead.
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw GenerateMentorySchemaError.protocFailed(target.name, process.terminationStatus)
        }

        let generated = target.directoryURL.appending(path: "Generated")
        try FileManager.default.createDirectory(at: generated, withIntermediateDirectories: true)
        var written = Set<String>()
        for proto in protos {
            let (relative, base) = try command.names(of: proto)
            for name in ["\(base).pb.swift", "\(base).schema.swift"] {
                let code = try String(contentsOf: output.appending(path: name), encoding: .utf8)
                let header = """
                    // Generated from \(relative) by mentoryd's generate-mentory-schema; do not edit.
                    // Regenerate: swift package --allow-writing-to-package-directory generate-mentory-schema \
                    --target \(target.name)

                    """
                let destination = generated.appending(path: name)
                let text = header + code
                // Rewrite only what changed, so that an unchanged file keeps its date and is not recompiled.
                if (try? String(contentsOf: destination, encoding: .utf8)) != text {
                    try text.write(to: destination, atomically: true, encoding: .utf8)
                }
                written.insert(name)
            }
        }
        for stale in try FileManager.default.contentsOfDirectory(atPath: generated.fileSystemPath)
        where stale.hasSuffix(".swift") && !written.contains(stale) {
            try FileManager.default.removeItem(at: generated.appending(path: stale))
        }
        let files = written.sorted().joined(separator: ", ")
        print("generate-mentory-schema: \(target.name): \(files) in \(generated.fileSystemPath)")
    }

    /// The `.proto` files under `directory`, on disk (a target may exclude them from its sources), sorted.
    private static func protos(in directory: URL) -> [URL] {
        guard
            let enumerator = FileManager.default.enumerator(
                at: directory, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles])
        else { return [] }
        return enumerator.compactMap { $0 as? URL }.filter { $0.pathExtension == "proto" }
            .sorted { $0.fileSystemPath < $1.fileSystemPath }
    }
}

/// Why the command could not generate; SwiftPM prints the description.
enum GenerateMentorySchemaError: Error, CustomStringConvertible {
    case usage(String)
    case noTarget(String)
    case notSwift(String)
    case protocFailed(String, Int32)

    var description: String {
        switch self {
        case .usage(let extra):
            "generate-mentory-schema: unexpected arguments '\(extra)'; usage: generate-mentory-schema [--target T ...]"
        case .noTarget(let target):
            "generate-mentory-schema: the package has no target '\(target)'"
        case .notSwift(let target):
            "generate-mentory-schema generates Swift: target '\(target)' is not a Swift target"
        case .protocFailed(let target, let status):
            "generate-mentory-schema: protoc failed (status \(status)) for target '\(target)'"
        }
    }
}
