/// `protoc-gen-mentory`: the protoc plugin that turns each `.proto` file's namespace declarations
/// (services carrying `(mentory.v1.namespace)`, `(mentory.v1.namespace_version)` and repeated
/// `(mentory.v1.topic)`) into `<file>.schema.swift`, or with `--mentory_opt=Output=Markdown` into
/// `<file>.namespaces.md` for docs/PROTOCOL.md. `scripts/generate-protos.sh` builds and runs it.
///
///     protoc --plugin=protoc-gen-mentory=$(swift build --show-bin-path)/protoc-gen-mentory \
///       --mentory_out=OUT --mentory_opt=Visibility=Public --proto_path=... file.proto
///
/// Options (`--mentory_opt=Key=Value`, several separated by commas):
/// - `Output=Swift|Markdown` (default `Swift`).
/// - `Visibility=Internal|Public|Package`, as protoc-gen-swift (default `Internal`).
/// - `SchemaName=Name`: the container enum (default from the package: `mentory.v1` gives `MentorySchema`,
///   `greeter.v1` gives `GreeterSchema`; another file of mentory.proto's package is named after its file:
///   `mentory_domain.proto` gives `MentoryDomainSchema`).
/// - `ImportMentoryWire=true|false`: whether the generated file imports `MentoryWire`, where
///   `NamespaceSchema` and the other schema types live. By default it does unless the file is
///   mentory.proto (the file declaring the schema options, compiled into MentoryWire) or
///   `ProtoPathModuleMappings` maps the file to the module `MentoryWire`. A third-party file that
///   imports mentory.proto therefore needs nothing more, though it should pass the same
///   `ProtoPathModuleMappings` as to protoc-gen-swift (mapping mentory.proto to MentoryWire) so that
///   the message types of other modules are named with their module.
/// - `ProtoPathModuleMappings=FILE`, `FileNaming=FullPath|PathToUnderscores|DropPath`: as protoc-gen-swift.
///
/// The Swift message names come from swift-protobuf's `SwiftProtobufNamer`, so they match what
/// protoc-gen-swift generates (well-known types are `SwiftProtobuf.Google_Protobuf_…`). The plugin fails,
/// with a message naming the file and service, on a service without `(namespace)` in a file with
/// namespaces, repeated namespace, method or topic names, streaming rpcs, topics whose messages are not
/// declared in the file or its imports, and names that would clash in Swift.
import MentorySchemaGenerator
import SwiftProtobuf
import SwiftProtobufPluginLibrary

@main
struct MentoryGeneratorPlugin: CodeGenerator {
    func generate(
        files: [FileDescriptor],
        parameter: any CodeGeneratorParameter,
        protoCompilerContext: any ProtoCompilerContext,
        generatorOutputs: any GeneratorOutputs
    ) throws {
        let options = try SchemaGeneratorOptions(pairs: parameter.parsedPairs)
        for output in try SchemaGenerator.generate(files: files, options: options) {
            try generatorOutputs.add(fileName: output.name, contents: output.contents)
        }
    }

    var supportedFeatures: [Google_Protobuf_Compiler_CodeGeneratorResponse.Feature] { [.proto3Optional] }

    var version: String? { "1" }
}
