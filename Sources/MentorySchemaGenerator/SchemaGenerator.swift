import SwiftProtobufPluginLibrary

/// The code generator behind `protoc-gen-mentory`, callable in-process (tests use it that way).
public enum SchemaGenerator {
    /// One file to write.
    public struct Output: Equatable {
        public var name: String
        public var contents: String
    }

    /// The outputs for `files` (the files protoc asks to generate): one per file that declares
    /// namespaces, none for the others.
    public static func generate(
        files: [FileDescriptor],
        options: SchemaGeneratorOptions
    ) throws(SchemaGenerationError) -> [Output] {
        var outputs: [Output] = []
        for file in files {
            let namespaces = try namespaceDeclarations(in: file)
            guard !namespaces.isEmpty else { continue }
            switch options.output {
            case .swift:
                var writer = SwiftSchemaWriter(file: file, namespaces: namespaces, options: options)
                try writer.validateNames()
                outputs.append(
                    Output(name: options.outputPath(for: file.name, suffix: ".schema.swift"), contents: writer.write())
                )
            case .markdown:
                let writer = MarkdownSchemaWriter(file: file, namespaces: namespaces)
                outputs.append(
                    Output(name: options.outputPath(for: file.name, suffix: ".namespaces.md"), contents: writer.write())
                )
                outputs.append(
                    Output(
                        name: options.outputPath(for: file.name, suffix: ".messages.txt"),
                        contents: MessageListingWriter(file: file).write()))
            }
        }
        return outputs
    }
}
