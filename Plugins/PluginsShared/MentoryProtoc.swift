import Foundation
import PackagePlugin

// Shared by the build plugin MentorySchemaPlugin and the command plugin GenerateMentorySchema: each
// plugin's folder links to this one (`PluginsShared`), as grpc-swift-protobuf's plugins share theirs,
// since SwiftPM gives plugins no module they could both import.

/// The one `protoc` command that generates a handler target's Swift code from its `.proto` files, with
/// `protoc-gen-swift` (the messages, `NAME.pb.swift`) and `protoc-gen-mentory` (the typed schema,
/// `NAME.schema.swift`), and how each plugin finds what it needs:
/// - `protoc`: `$PROTOC_PATH`, else on the `PATH` (`apt-get install protobuf-compiler libprotobuf-dev`);
/// - `mentory.proto` and its module mapping (`module-mappings.asciipb`): in the `MentoryWire` target's
///   `Proto` folder, in whichever checkout of mentoryd the package depends on;
/// - `mentory_domain.proto`: in the `MentoryDomain` target's `Proto` folder, in the same checkout.
struct MentoryProtoc {
    /// The plugin's name, which starts every error message.
    let tool: String
    let protoc: URL
    let protocGenSwift: URL
    let protocGenMentory: URL
    /// The `Proto` folder of `MentoryWire`: `mentory.proto` and the module mapping.
    let wireProtos: URL
    /// The `Proto` folder of `MentoryDomain`: `mentory_domain.proto`.
    let domainProtos: URL
    /// The target whose `.proto` files are compiled.
    let target: SwiftSourceModuleTarget

    /// Finds the tools and mentoryd's `.proto` folders for `target`; `tool` names the plugin in errors.
    init(tool: String, context: PluginContext, target: SwiftSourceModuleTarget) throws {
        self.tool = tool
        self.target = target
        self.wireProtos = try Self.protoDirectory(
            of: "MentoryWire", holding: ["mentory.proto", "module-mappings.asciipb"], for: target,
            in: context.package, tool: tool)
        self.domainProtos = try Self.protoDirectory(
            of: "MentoryDomain", holding: ["mentory_domain.proto"], for: target, in: context.package, tool: tool)
        self.protoc = try Self.protoc(context, tool: tool)
        self.protocGenSwift = try context.tool(named: "protoc-gen-swift").url
        self.protocGenMentory = try context.tool(named: "protoc-gen-mentory").url
    }

    var mentoryProto: URL { self.wireProtos.appending(path: "mentory.proto") }
    var domainProto: URL { self.domainProtos.appending(path: "mentory_domain.proto") }
    var mappings: URL { self.wireProtos.appending(path: "module-mappings.asciipb") }

    /// The files the generation reads besides the `.proto` files compiled: a change to one regenerates.
    var inputs: [URL] {
        [self.mentoryProto, self.domainProto, self.mappings, self.protocGenSwift, self.protocGenMentory]
    }

    /// protoc's arguments to compile `protos` (files of the target's folder) into `output`.
    func arguments(compiling protos: [URL], into output: URL) -> [String] {
        [
            "--plugin=protoc-gen-swift=\(self.protocGenSwift.fileSystemPath)",
            "--plugin=protoc-gen-mentory=\(self.protocGenMentory.fileSystemPath)",
            "--swift_opt=Visibility=Public",
            "--swift_opt=FileNaming=PathToUnderscores",
            "--swift_opt=ProtoPathModuleMappings=\(self.mappings.fileSystemPath)",
            "--swift_out=\(output.fileSystemPath)",
            "--mentory_opt=Visibility=Public",
            "--mentory_opt=FileNaming=PathToUnderscores",
            "--mentory_opt=ProtoPathModuleMappings=\(self.mappings.fileSystemPath)",
            "--mentory_out=\(output.fileSystemPath)",
            "--proto_path=\(self.target.directoryURL.fileSystemPath)",
            "--proto_path=\(self.wireProtos.fileSystemPath)",
            "--proto_path=\(self.domainProtos.fileSystemPath)",
        ] + protos.map(\.fileSystemPath)
    }

    /// `proto`'s path under the target's folder (as protoc names it) and the base name of the files
    /// generated from it: `DIR/NAME.proto` gives `DIR_NAME` (`FileNaming=PathToUnderscores`).
    func names(of proto: URL) throws -> (relative: String, base: String) {
        let relative = try Self.path(of: proto, under: self.target.directoryURL, tool: self.tool)
        return (relative, String(relative.dropLast(".proto".count)).replacingOccurrences(of: "/", with: "_"))
    }

    /// `protoc`: `$PROTOC_PATH` if set, else the one on the `PATH`.
    private static func protoc(_ context: PluginContext, tool: String) throws -> URL {
        if let path = ProcessInfo.processInfo.environment["PROTOC_PATH"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        if let found = try? context.tool(named: "protoc") { return found.url }
        // SwiftPM searches its toolchain's folders; protoc is usually on the PATH instead.
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appending(path: "protoc")
            if FileManager.default.isExecutableFile(atPath: candidate.fileSystemPath) { return candidate }
        }
        throw MentoryProtocError(tool: tool, problem: .noProtoc)
    }

    /// The `Proto` folder of mentoryd's target `module`, which must hold `files`: the target found among
    /// the target's dependencies, else anywhere in the package's dependency graph.
    private static func protoDirectory(
        of module: String,
        holding files: [String],
        for target: SwiftSourceModuleTarget,
        in package: Package,
        tool: String
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
        guard let found else {
            throw MentoryProtocError(tool: tool, problem: .noMentoryModule(module, target.name))
        }
        let directory = found.directoryURL.appending(path: "Proto")
        for file in files {
            guard FileManager.default.fileExists(atPath: directory.appending(path: file).fileSystemPath) else {
                throw MentoryProtocError(tool: tool, problem: .missing(directory.appending(path: file).fileSystemPath))
            }
        }
        return directory
    }

    /// `file`'s path relative to `directory`, as protoc names it under `--proto_path=directory`.
    private static func path(of file: URL, under directory: URL, tool: String) throws -> String {
        let fileComponents = file.standardizedFileURL.pathComponents
        let directoryComponents = directory.standardizedFileURL.pathComponents
        guard fileComponents.starts(with: directoryComponents), fileComponents.count > directoryComponents.count
        else {
            throw MentoryProtocError(
                tool: tool, problem: .outsideTarget(file.fileSystemPath, directory.fileSystemPath))
        }
        return fileComponents.dropFirst(directoryComponents.count).joined(separator: "/")
    }
}

/// Why a plugin could not find what the protoc command needs; SwiftPM prints the description.
struct MentoryProtocError: Error, CustomStringConvertible {
    enum Problem {
        case noProtoc
        case noMentoryModule(String, String)
        case missing(String)
        case outsideTarget(String, String)
    }

    /// The plugin's name, which starts the message.
    var tool: String
    var problem: Problem

    var description: String {
        switch self.problem {
        case .noProtoc:
            "\(self.tool): protoc not found on the PATH; install it (apt-get install protobuf-compiler"
                + " libprotobuf-dev) or set PROTOC_PATH to its path"
        case .noMentoryModule(let module, let target):
            "\(self.tool): target '\(target)' must depend on mentoryd's MentoryHandlerKit (or MentoryWire),"
                + " in whose package mentoryd's \(module) holds its .proto files; \(module) is not found"
        case .missing(let path):
            "\(self.tool): \(path) is missing from the mentoryd checkout"
        case .outsideTarget(let file, let directory):
            "\(self.tool): \(file) is not under the target's folder \(directory)"
        }
    }
}

extension URL {
    /// The path as the file system spells it, without percent escapes.
    var fileSystemPath: String { self.path(percentEncoded: false) }
}
