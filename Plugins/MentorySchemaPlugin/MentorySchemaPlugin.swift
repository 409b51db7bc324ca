import Foundation
import PackagePlugin

/// Generates a handler package's Swift code from the `.proto` files among its target's sources, at
/// build time, the way grpc-swift-protobuf's `GRPCProtobufGenerator` does.
///
/// A target lists `plugins: [.plugin(name: "MentorySchemaPlugin", package: "mentoryd")]` and holds its
/// `.proto` files with its Swift sources. For each `NAME.proto` (at `DIR/NAME.proto` under the target's
/// folder: `DIR_NAME`), one `protoc` run writes, into the build folder:
/// - `NAME.pb.swift`: the messages (`protoc-gen-swift`);
/// - `NAME.schema.swift`: the typed namespaces, methods and topics and the embedded descriptors
///   (`protoc-gen-mentory`).
///
/// The plugin finds what a handler package used to pass by hand:
/// - `protoc`: `$PROTOC_PATH`, else on the `PATH` (`apt-get install protobuf-compiler libprotobuf-dev`);
/// - `mentory.proto`, for `import "mentory.proto"`: in the `MentoryWire` target's `Proto` folder, in
///   whichever checkout of mentoryd the package depends on;
/// - `mentory_domain.proto` (the built-in domain's messages, `mentory.v1.DiaryEntry` and the others), for
///   `import "mentory_domain.proto"`: in the `MentoryDomain` target's `Proto` folder, in the same checkout;
/// - the module mapping `mentory.proto` -> `MentoryWire`, `mentory_domain.proto` -> `MentoryDomain`,
///   shipped next to mentory.proto (`module-mappings.asciipb`).
///
/// The generated declarations are `public`: a handler's `Namespace` is part of its public conformance
/// to `MentoryHandler`, and the executable that adds the handler, its tests and other handlers calling
/// it (`context.call(GratitudeSchema.Gratitude.list, …)`) name the schema from other modules.
@main
struct MentorySchemaPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard let target = target as? SwiftSourceModuleTarget else {
            throw MentorySchemaPluginError.notSwift(target.name)
        }
        let protos = target.sourceFiles(withSuffix: ".proto").map(\.url)
        guard !protos.isEmpty else {
            Diagnostics.warning(
                "MentorySchemaPlugin: target '\(target.name)' holds no .proto file; nothing to generate")
            return []
        }
        let wireProtos = try Self.protoDirectory(
            of: "MentoryWire", holding: ["mentory.proto", "module-mappings.asciipb"], for: target, in: context.package)
        let domainProtos = try Self.protoDirectory(
            of: "MentoryDomain", holding: ["mentory_domain.proto"], for: target, in: context.package)
        let mentoryProto = wireProtos.appending(path: "mentory.proto")
        let domainProto = domainProtos.appending(path: "mentory_domain.proto")
        let mappings = wireProtos.appending(path: "module-mappings.asciipb")
        let protoc = try Self.protoc(context)
        let protocGenSwift = try context.tool(named: "protoc-gen-swift").url
        let protocGenMentory = try context.tool(named: "protoc-gen-mentory").url
        let output = context.pluginWorkDirectoryURL

        return try protos.map { proto in
            let relative = try Self.path(of: proto, under: target.directoryURL)
            let base = String(relative.dropLast(".proto".count)).replacingOccurrences(of: "/", with: "_")
            return .buildCommand(
                displayName: "Generating the mentory schema of \(relative) for \(target.name)",
                executable: protoc,
                arguments: [
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
                    proto.fileSystemPath,
                ],
                inputFiles: [proto, mentoryProto, domainProto, mappings, protocGenSwift, protocGenMentory],
                outputFiles: [
                    output.appending(path: "\(base).pb.swift"),
                    output.appending(path: "\(base).schema.swift"),
                ]
            )
        }
    }

    /// `protoc`: `$PROTOC_PATH` if set, else the one on the `PATH`.
    private static func protoc(_ context: PluginContext) throws -> URL {
        if let path = ProcessInfo.processInfo.environment["PROTOC_PATH"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        if let tool = try? context.tool(named: "protoc") { return tool.url }
        // SwiftPM searches its toolchain's folders; protoc is usually on the PATH instead.
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appending(path: "protoc")
            if FileManager.default.isExecutableFile(atPath: candidate.fileSystemPath) { return candidate }
        }
        throw MentorySchemaPluginError.noProtoc
    }

    /// The `Proto` folder of mentoryd's target `module` (`MentoryWire`: mentory.proto and the module
    /// mapping; `MentoryDomain`: mentory_domain.proto), which must hold `files`: the target found among
    /// the target's dependencies, else anywhere in the package's dependency graph.
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
        guard let found else { throw MentorySchemaPluginError.noMentoryModule(module, target.name) }
        let directory = found.directoryURL.appending(path: "Proto")
        for file in files {
            guard FileManager.default.fileExists(atPath: directory.appending(path: file).fileSystemPath) else {
                throw MentorySchemaPluginError.missing(directory.appending(path: file).fileSystemPath)
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
            throw MentorySchemaPluginError.outsideTarget(file.fileSystemPath, directory.fileSystemPath)
        }
        return fileComponents.dropFirst(directoryComponents.count).joined(separator: "/")
    }
}

/// Why the plugin could not plan the generation; SwiftPM prints the description.
enum MentorySchemaPluginError: Error, CustomStringConvertible {
    case notSwift(String)
    case noProtoc
    case noMentoryModule(String, String)
    case missing(String)
    case outsideTarget(String, String)

    var description: String {
        switch self {
        case .notSwift(let target):
            "MentorySchemaPlugin generates Swift: target '\(target)' is not a Swift target"
        case .noProtoc:
            "MentorySchemaPlugin: protoc not found on the PATH; install it (apt-get install protobuf-compiler"
                + " libprotobuf-dev) or set PROTOC_PATH to its path"
        case .noMentoryModule(let module, let target):
            "MentorySchemaPlugin: target '\(target)' must depend on mentoryd's MentoryHandlerKit (or MentoryWire),"
                + " in whose package mentoryd's \(module) holds its .proto files; \(module) is not found"
        case .missing(let path):
            "MentorySchemaPlugin: \(path) is missing from the mentoryd checkout"
        case .outsideTarget(let file, let directory):
            "MentorySchemaPlugin: \(file) is not under the target's folder \(directory)"
        }
    }
}

extension URL {
    /// The path as the file system spells it, without percent escapes.
    fileprivate var fileSystemPath: String { self.path(percentEncoded: false) }
}
