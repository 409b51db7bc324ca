import Foundation

extension DescriptorPool {
    /// Decodes `binary` as the message `messageName` and writes it as proto3 JSON.
    ///
    /// Fields come in field-number order under their JSON names; fields at their default value are
    /// left out unless the field tracks presence; 64-bit integers are strings (unless
    /// `options.int64AsNumbers`); enums are names (numbers when the enum has no name for the value);
    /// bytes are base64; the well-known types have their special forms (wrappers as bare values,
    /// Timestamp and Duration as strings, Struct/Value/ListValue as plain JSON, FieldMask as a
    /// string, Any with `@type`). Unknown fields are skipped.
    public func jsonString(
        fromBinary binary: Data,
        messageName: String,
        options: JSONOutputOptions = JSONOutputOptions()
    ) throws(DescriptorError) -> String {
        let type = try self.requireMessage(messageName)
        let message = try self.decodeBinary(binary, as: type)
        var writer = JSONWriter(pretty: options.pretty)
        writer.write(try JSONRenderer(pool: self, options: options).render(message, as: type))
        return writer.text
    }

    /// Parses proto3 JSON as the message `messageName` and encodes it in protobuf binary.
    ///
    /// Field names may be JSON names or .proto names; 64-bit integers may be strings or numbers;
    /// enums may be names or numbers; `null` leaves a field out; a wrapper message is its bare value
    /// (or `{}` for its default). An unknown field, a field given
    /// twice, two members of one oneof or a value that does not fit its field is an error that
    /// names the field and what it accepts.
    public func binary(fromJSON json: String, messageName: String) throws(DescriptorError) -> Data {
        try self.binary(fromJSON: Data(json.utf8), messageName: messageName)
    }

    /// Parses proto3 JSON (UTF-8 bytes) as the message `messageName` and encodes it in protobuf binary.
    public func binary(fromJSON json: Data, messageName: String) throws(DescriptorError) -> Data {
        let type = try self.requireMessage(messageName)
        guard json.count <= self.limits.maxJSONBytes else {
            throw DescriptorError(
                .limitExceeded, "the JSON is \(json.count) bytes; at most \(self.limits.maxJSONBytes) are accepted")
        }
        let value = try JSONParser.parse(Array(json), maxDepth: self.limits.maxDepth)
        let message = try JSONReader(pool: self).message(value, as: type, path: "", depth: 0)
        var writer = BinaryWriter(pool: self)
        try writer.write(message, as: type)
        return Data(writer.bytes)
    }

    /// Checks that `binary` is a valid encoding of `messageName`, with the same bounds as transcoding.
    public func validate(binary: Data, messageName: String) throws(DescriptorError) {
        _ = try self.decodeBinary(binary, as: try self.requireMessage(messageName))
    }

    private func decodeBinary(_ binary: Data, as type: MessageDescriptor) throws(DescriptorError) -> DynamicMessage {
        guard binary.count <= self.limits.maxBinaryBytes else {
            throw DescriptorError(
                .limitExceeded,
                "the message is \(binary.count) bytes; at most \(self.limits.maxBinaryBytes) are accepted")
        }
        var reader = BinaryReader(bytes: Array(binary), pool: self)
        return try reader.decodeMessage(type, depth: 0)
    }
}
