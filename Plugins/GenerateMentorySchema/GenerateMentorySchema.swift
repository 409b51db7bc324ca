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
/// SwiftPM gives plugins no shared module, so the protoc arguments and the search for protoc and for
/// mentoryd's `.proto` folders are copied from `Plugins/MentorySchemaPlugin/MentorySchemaPlugin.swift`:
/// change both together.
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
        let protoc = try Self.protoc(context)
        let protocGenSwift = try context.tool(named: "protoc-gen-swift").url
        let protocGenMentory = try context.tool(named: "protoc-gen-mentory").url
        for target in targets {
            try generate(
                target, package: context.package, work: context.pluginWorkDirectoryURL,
                protoc: protoc, protocGenSwift: protocGenSwift, protocGenMentory: protocGenMentory)
        }
    }

    private func generate(
        _ target: SwiftSourceModuleTarget,
        package: Package,
        work: URL,
        protoc: URL,
        protocGenSwift: URL,
        protocGenMentory: URL
    ) throws {
        let protos = Self.protos(in: target.directoryURL)
        guard !protos.isEmpty else {
            Diagnostics.warning("generate-mentory-schema: target '\(target.name)' holds no .proto file")
            return
        }
        let wireProtos = try Self.protoDirectory(
            of: "MentoryWire", holding: ["mentory.proto", "module-mappings.asciipb"], for: target, in: package)
        let domainProtos = try Self.protoDirectory(
            of: "MentoryDomain", holding: ["mentory_domain.proto"], for: target, in: package)
        let mappings = wireProtos.appending(path: "module-mappings.asciipb")
        let output = work.appending(path: target.name)
        try? FileManager.default.removeItem(at: output)
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)

        // The same protoc command as MentorySchemaPlugin's build command, copied: keep them equal.
        let arguments =
            [
                "--plugin=protoc-gen-swift=\(protocGenSwift.fileSystemPath)",
                "--plugin=protoc-gen-mentory=\(protocGenMentory.fileSystemPath)",
                "--swift_opt=Visibility=Public",
                "--swift_opt=FileNaming=PathToUnderscores",
                "--swift_opt=ProtoPathModuleMappings=\(mappings.fileSystemPath)",
                "--swift_out=\(output.fileSystemPath)",
                "--mentory_opt=Visibility=Public",
                "--mentory_opt=FileNaming=PathToUnderscores",
                "--mentory_opt=ProtoPathModuleMappings=\(mappings.fileSystemPath)",
                "--mentory_out=\(output.fileSystemPath)",
                "--proto_path=\(target.directoryURL.fileSystemPath)",
                "--proto_path=\(wireProtos.fileSystemPath)",
                "--proto_path=\(domainProtos.fileSystemPath)",
            ] + protos.map(\.fileSystemPath)
        let process = Process()
        process.executableURL = protoc
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw GenerateMentorySchemaError.protocFailed(target.name, process.terminationStatus)
        }

        let generated = target.directoryURL.appending(path: "Generated")
        try FileManager.default.createDirectory(at: generated, withIntermediateDirectories: true)
        var written = Set<String>()
        for proto in protos {
            let relative = try Self.path(of: proto, under: target.directoryURL)
            let base = String(relative.dropLast(".proto".count)).replacingOccurrences(of: "/", with: "_")
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

    /// `protoc`: `$PROTOC_PATH` if set, else the one on the `PATH` (as MentorySchemaPlugin).
    private static func protoc(_ context: PluginContext) throws -> URL {
        if let path = ProcessInfo.processInfo.environment["PROTOC_PATH"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        if let tool = try? context.tool(named: "protoc") { return tool.url }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appending(path: "protoc")
            if FileManager.default.isExecutableFile(atPath: candidate.fileSystemPath) { return candidate }
        }
        throw GenerateMentorySchemaError.noProtoc
    }

    /// The `Proto` folder of mentoryd's target `module`, which must hold `files` (as MentorySchemaPlugin).
    private static func protoDirectory(
        of module: String,
        holding files: [String],
        for target: SwiftSourceModuleTarget,
        in package: Package
    ) throws -> URL {
        var found = target.recursiveTargetDependencies.first { $0.name == module }
        if found == nil {
            var seen = Set<String>()
            var packages = [package]
            while found == nil, let next = packages.popLast() {
                guard seen.insert(next.id).inserted else { continue }
                found = next.targets.first { $0.name == module }
                packages.append(contentsOf: next.dependencies.map(\.package))
            }
        }
        guard let found else { throw GenerateMentorySchemaError.noMentoryModule(module, target.name) }
        let directory = found.directoryURL.appending(path: "Proto")
        for file in files {
            guard FileManager.default.fileExists(atPath: directory.appending(path: file).fileSystemPath) else {
                throw GenerateMentorySchemaError.missing(directory.appending(path: file).fileSystemPath)
            }
        }
        return directory
    }

    /// `file`'s path relative to `directory`, as protoc names it under `--proto_path=directory`.
    private static func path(of file: URL, under directory: URL) throws -> String {
        let fileComponents = file.standardizedFileURL.pathComponents
        let directoryComponents = directory.standardizedFileURL.pathComponents
        guard fileComponents.starts(with: directoryComponents), fileComponents.count > directoryComponents.count
        else {
            throw GenerateMentorySchemaError.outsideTarget(file.fileSystemPath, directory.fileSystemPath)
        }
        return fileComponents.dropFirst(directoryComponents.count).joined(separator: "/")
    }
}

/// Why the command could not generate; SwiftPM prints the description.
enum GenerateMentorySchemaError: Error, CustomStringConvertible {
    case usage(String)
    case noTarget(String)
    case notSwift(String)
    case noProtoc
    case protocFailed(String, Int32)
    case noMentoryModule(String, String)
    case missing(String)
    case outsideTarget(String, String)

    var description: String {
        switch self {
        case .usage(let extra):
            "generate-mentory-schema: unexpected arguments '\(extra)'; usage: generate-mentory-schema [--target T ...]"
        case .noTarget(let target):
            "generate-mentory-schema: the package has no target '\(target)'"
        case .notSwift(let target):
            "generate-mentory-schema generates Swift: target '\(target)' is not a Swift target"
        case .noProtoc:
            "generate-mentory-schema: protoc not found on the PATH; install it (apt-get install protobuf-compiler"
                + " libprotobuf-dev) or set PROTOC_PATH to its path"
        case .protocFailed(let target, let status):
            "generate-mentory-schema: protoc failed (status \(status)) for target '\(target)'"
        case .noMentoryModule(let module, let target):
            "generate-mentory-schema: target '\(target)' must depend on mentoryd's MentoryHandlerKit (or MentoryWire),"
                + " in whose package mentoryd's \(module) holds its .proto files; \(module) is not found"
        case .missing(let path):
            "generate-mentory-schema: \(path) is missing from the mentoryd checkout"
        case .outsideTarget(let file, let directory):
            "generate-mentory-schema: \(file) is not under the target's folder \(directory)"
        }
    }
}

extension URL {
    /// The path as the file system spells it, without percent escapes.
    fileprivate var fileSystemPath: String { self.path(percentEncoded: false) }
}
