import NIOCore

/// Constants that define version 1 of the mentoryd wire protocol.
///
/// See `docs/PROTOCOL.md` for the full description.
public enum WireProtocol {
    /// The protocol version this build speaks. `Hello.protocolVersion` must equal it.
    public static let version: UInt32 = 1

    /// The size of the big-endian length prefix in front of every frame.
    public static let lengthPrefixSize = 4

    /// The default largest payload a frame may carry: 1 MiB.
    public static let defaultMaxFrameLength = 1 << 20

    /// The plugin protocol version this build speaks; `PluginRegisterRequest.plugin_protocol_version` must equal it.
    public static let pluginProtocolVersion: UInt32 = 1

    /// The most methods one plugin may register.
    public static let maxPluginMethods = 256

    /// The most topics one plugin may register.
    public static let maxPluginTopics = 64

    /// The most UTF-8 bytes of a failed plugin's reason (`PluginStatus.reason`) the daemon keeps;
    /// a longer one is cut and ends in "…".
    public static let maxPluginFailureReasonBytes = 512
}

/// A well-known namespace or topic name, as `MentorySchema` declares it (from the services in mentory.proto);
/// MentoryDomain adds the built-in domain's (`mentor`, `reachability`, `diary`).
public enum WireNames {
    /// The namespace built into the daemon: `ping`, `status`, `subscribe`, `unsubscribe`, `describe`.
    public static let session = MentorySchema.Session.name
    /// The namespace built into the daemon through which plugins register and publish.
    public static let plugin = MentorySchema.Plugin.name
}
