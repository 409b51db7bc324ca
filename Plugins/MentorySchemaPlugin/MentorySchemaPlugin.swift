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
        let command = try MentoryProtoc(tool: "MentorySchemaPlugin", context: context, target: target)
        let output = context.pluginWorkDirectoryURL
        return try protos.map { proto in
            let (relative, base) = try command.names(of: proto)
            return .buildCommand(
                displayName: "Generating the mentory schema of \(relative) for \(target.name)",
                executable: command.protoc,
                arguments: command.arguments(compiling: [proto], into: output),
                inputFiles: [proto] + command.inputs,
                outputFiles: [
                    output.appending(path: "\(base).pb.swift"),
                    output.appending(path: "\(base).schema.swift"),
                ]
            )
        }
    }
}

/// Why the plugin could not plan the generation; SwiftPM prints the description.
enum MentorySchemaPluginError: Error, CustomStringConvertible {
    case notSwift(String)

    var description: String {
        switch self {
        case .notSwift(let target):
            "MentorySchemaPlugin generates Swift: target '\(target)' is not a Swift target"
        }
    }
}
