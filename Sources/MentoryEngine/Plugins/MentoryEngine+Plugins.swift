#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire
import NIOCore
import SwiftProtobuf

extension MentoryEngine {
    // MARK: Declaring

    /// Hosts a plugin the configuration declares; it waits until its process registers.
    ///
    /// Calls to its namespace fail UNAVAILABLE until then. Throws when the namespace is taken.
    package func declarePlugin(_ declaration: PluginDeclaration) throws(MentoryError) {
        let namespace = declaration.namespace
        guard self.namespaceInfo(namespace) == nil else {
            throw .internal("plugin '\(declaration.name)' declares namespace '\(namespace)', which is already served")
        }
        let plugin = HostedPlugin(declaration, since: self.clock.now())
        self.registry.plugins.declare(plugin)
        self.registry.registrationOrder.append(namespace)
        self.restoreRegistration(of: plugin)
        self.refreshDescriptors()
        self.logger.debug("declared plugin", metadata: ["plugin": "\(declaration.name)", "namespace": "\(namespace)"])
        // A plugin refused before because nothing declared it registers again once its connection closes.
        for id in self.registry.plugins.takeConnectionsAwaiting(namespace) {
            self.connections[id]?.sink.close(
                because: .unavailable(
                    "plugin '\(declaration.name)' is declared now (plugins.\(declaration.name)); register again"))
        }
    }

    /// Makes `declarations` the declared plugins, as a reload of the configuration reads them, and returns what
    /// changed.
    ///
    /// - A plugin no longer declared (or declared with another namespace) stops being served at once: its
    ///   calls in flight fail UNAVAILABLE, the subscriptions to its topics end with an ENDED event saying why,
    ///   and its connection is closed with the reason.
    /// - A plugin declared anew is hosted as at start-up; a connection refused earlier for want of its
    ///   declaration is closed, so that the plugin registers again at once.
    /// - A plugin whose `requires` changed keeps its registration and serves on.
    ///
    /// The caller checks `declarations` first, as start-up does: unique namespaces, none served in-process, and
    /// every requirement served. A declaration that still cannot be hosted is left out and named in the result.
    package func declarePlugins(_ declarations: [PluginDeclaration]) -> PluginDeclarationChanges {
        var changes = PluginDeclarationChanges()
        let wanted = Dictionary(declarations.map { ($0.namespace, $0) }, uniquingKeysWith: { first, _ in first })
        for plugin in self.registry.plugins.declared {
            guard let declaration = wanted[plugin.namespace], declaration.name == plugin.declaration.name else {
                self.undeclarePlugin(plugin.namespace)
                changes.removed.append(plugin.declaration.name)
                continue
            }
            if declaration != plugin.declaration {
                plugin.declaration = declaration
                changes.changed.append(declaration.name)
            }
        }
        for declaration in declarations where self.registry.plugins[declaration.namespace] == nil {
            do throws(MentoryError) {
                try self.declarePlugin(declaration)
                changes.added.append(declaration.name)
            } catch {
                changes.refused.append((declaration.name, error.message))
            }
        }
        if !changes.changed.isEmpty { self.invalidateRoutes() }
        return changes
    }

    /// Stops serving the plugin declared for `namespace`: see ``declarePlugins(_:)``.
    private func undeclarePlugin(_ namespace: String) {
        guard let (plugin, connection) = self.registry.plugins.undeclare(namespace) else { return }
        self.registry.registrationOrder.removeAll { $0 == namespace }
        let name = plugin.declaration.name
        let removed = "plugin '\(name)' is no longer declared (plugins.\(name) left the configuration)"
        for topic in plugin.info.topics.map(\.name) {
            for id in self.hub.subscribers(of: topic).sorted(by: { $0.rawValue < $1.rawValue }) {
                guard let subscriber = self.connections[id] else { continue }
                self.endSubscription(
                    id, to: topic, sink: subscriber.sink,
                    error: .notFound("topic '\(topic)' is no longer published: \(removed); it")
                )
            }
            self.hub.withdraw(topic)
        }
        let inFlight = plugin.pending.count
        plugin.failPending(.unavailable("namespace '\(namespace)' is no longer served: \(removed)"))
        if let connection {
            self.connections[connection]?.sink.close(
                because: .unavailable("\(removed); this connection serves nothing"))
        }
        self.invalidateRoutes()
        self.logger.notice(
            "\(removed): namespace \(namespace) is no longer served; \(inFlight) calls in flight failed UNAVAILABLE",
            metadata: ["plugin": "\(name)", "namespace": "\(namespace)", "callsFailed": "\(inFlight)"])
    }

    /// Makes the namespace `plugin` registered last (before this daemon started) known while it is
    /// absent: its methods and descriptors are described, and its topics accept subscriptions, held
    /// until it registers. A saved registration that cannot be read or no longer validates is ignored.
    private func restoreRegistration(of plugin: HostedPlugin) {
        guard let files = self.configuration.pluginRegistrations else { return }
        let name = plugin.declaration.name
        let request: Mentory_V1_PluginRegisterRequest
        do {
            guard let saved = try files.load(name) else { return }
            request = saved
        } catch {
            self.logger.warning(
                "the plugin's saved registration cannot be read; its namespace is unknown until it registers",
                metadata: ["plugin": "\(name)", "path": "\(files.path(of: name))", "error": "\(error)"])
            return
        }
        do throws(MentoryError) {
            guard request.namespace == plugin.namespace else {
                throw .invalidArgument(
                    "it is for namespace '\(request.namespace)', but the plugin now declares '\(plugin.namespace)'")
            }
            let (info, encoded) = try self.checkRegistration(request)
            plugin.update(info: info, descriptors: SchemaDescriptors(base64Files: encoded))
            for topic in info.topics {
                self.hub.declare(topic.name, publishedBy: plugin.namespace)
            }
            self.logger.debug(
                "restored the plugin's last registration",
                metadata: ["plugin": "\(name)", "methods": "\(info.methods.count)", "topics": "\(info.topics.count)"])
        } catch {
            self.logger.warning(
                "the plugin's saved registration no longer applies; its namespace is unknown until it registers",
                metadata: ["plugin": "\(name)", "path": "\(files.path(of: name))", "reason": "\(error.message)"])
        }
    }

    /// The namespaces served in this process (handlers, not plugins), in registration order.
    package var inProcessNamespaces: [String] {
        self.registry.registrationOrder.filter { self.registry.handlers[$0] != nil }
    }

    /// Every declared plugin's state, as `session.status` reports it.
    public var pluginStatuses: [Mentory_V1_PluginStatus] {
        self.registry.plugins.statuses
    }

    /// Forgets what was derived from the plugins' registrations: the merged descriptors and the routes.
    func refreshDescriptors() {
        self.invalidateRoutes()
    }

    // MARK: The `plugin` namespace

    static func decodePluginRequest<Request: SwiftProtobuf.Message>(
        _ type: Request.Type,
        _ body: ByteBuffer,
        method: String
    ) throws(MentoryError) -> Request {
        do {
            return try Request(serializedBytes: ProtobufBuffer(body))
        } catch {
            throw .invalidArgument(
                "the body of 'plugin.\(method)' is not a valid \(Request.protoMessageName): \(error)")
        }
    }

    /// `plugin.call`: calls another namespace on behalf of the caller of a call forwarded to the
    /// calling plugin and still in flight, with that caller's access, deadline and call chain.
    func callForPlugin(_ body: ByteBuffer, call: RequestContext) async throws -> ProtobufBuffer {
        let request = try Self.decodePluginRequest(Mentory_V1_PluginCallRequest.self, body, method: call.method)
        guard let plugin = self.registry.plugins.plugin(on: call.connection.id) else {
            throw MentoryError.invalidArgument("register with plugin.register before calling on a caller's behalf")
        }
        guard let pending = plugin.pending[request.callID] else {
            throw MentoryError.invalidArgument(
                "call \(request.callID) is not in flight: plugin.call acts for the caller of a call the daemon"
                    + " forwarded to you, until you answer it or its deadline passes")
        }
        guard let caller = pending.caller else {
            throw MentoryError.invalidArgument(
                "call \(request.callID) asks for a snapshot, which has no caller to call on behalf of")
        }
        let reply = try await self.call(
            request.namespace, request.method, body: ByteBuffer(bytes: request.body), for: caller,
            from: plugin.namespace)
        var message = Mentory_V1_PluginCallReply()
        message.body = Data(reply.buffer.readableBytesView)
        return message.replyBody()
    }

    /// Registers the calling connection as the plugin serving `request.namespace`.
    func registerPlugin(
        _ request: Mentory_V1_PluginRegisterRequest,
        call: RequestContext
    ) throws(MentoryError) -> Mentory_V1_PluginRegisterReply {
        let connection = call.connection
        let namespace = request.namespace
        guard let plugin = self.registry.plugins[namespace] else {
            self.logDenial("plugin.register(\(namespace))", connection: connection)
            let declared = self.registry.plugins.declared.map { "\($0.declaration.name) (\($0.namespace))" }
            // Its connection is told when a reload declares the namespace, so that it registers again then.
            self.registry.plugins.awaitDeclaration(of: namespace, on: connection.id)
            throw .pluginNotDeclared(namespace: namespace, declared: declared)
        }
        try self.registry.plugins.checkConnection(connection.id, mayRegisterAs: plugin)
        let info: NamespaceInfo
        let files: [String]
        do throws(MentoryError) {
            (info, files) = try self.checkRegistration(request)
        } catch {
            self.registrationRefused(plugin, error: error, connection: connection)
            throw error
        }
        // Topics the plugin no longer declares stop being its; their ring stays for a later registration.
        for topic in plugin.info.topics where !info.topics.contains(where: { $0.name == topic.name }) {
            self.hub.withdraw(topic.name)
        }
        plugin.update(info: info, descriptors: SchemaDescriptors(base64Files: files))
        self.registry.plugins.connect(plugin, on: connection.id, since: self.clock.now())
        for topic in info.topics {
            self.hub.declare(topic.name, publishedBy: namespace)
        }
        self.refreshDescriptors()
        self.saveRegistration(request, of: plugin)
        self.logger.notice(
            """
            plugin registered: '\(plugin.declaration.name)' serves \(namespace) (\(info.methods.count) methods, \
            \(info.topics.count) topics) from \(connection.credentials.map(\.description) ?? "an unknown peer")
            """,
            metadata: [
                "plugin": "\(plugin.declaration.name)", "namespace": "\(namespace)", "connection": "\(connection.id)",
                "peer": "\(connection.credentials.map(\.description) ?? "unknown")",
                "methods": "\(info.methods.count)", "topics": "\(info.topics.count)",
            ]
        )
        // Subscribers kept across the plugin's absence get a reset, after this reply is on its way: a
        // background job, which hops back to this executor once this request has been answered.
        let topics = info.topics.map(\.name)
        self.runInBackground("reset the subscribers of a registered plugin's topics") {
            await self.resetSubscribers(of: topics)
        }
        var reply = Mentory_V1_PluginRegisterReply()
        reply.plugin = plugin.declaration.name
        reply.epoch = self.epoch
        reply.callTimeoutMs = Self.milliseconds(self.configuration.pluginCallTimeout)
        return reply
    }

    /// Keeps `request` as `plugin`'s last registration, for the next start; a failure to write it
    /// is logged and costs only that: the namespace is unknown after a restart until it registers.
    ///
    /// Written by a background job (``jobs``), never on the engine's executor (the event loop, which an
    /// `fsync` must not block), after the registration written before it.
    private func saveRegistration(_ request: Mentory_V1_PluginRegisterRequest, of plugin: HostedPlugin) {
        guard let files = self.configuration.pluginRegistrations else { return }
        let name = plugin.declaration.name
        let logger = self.logger
        let startsWriter = self.registry.plugins.queueRegistrationSave {
            do {
                try files.save(request, for: name)
            } catch {
                logger.warning(
                    "the plugin's registration cannot be saved; after a restart its topics are unknown until it registers",
                    metadata: ["plugin": "\(name)", "error": "\(error)"])
            }
        }
        guard startsWriter else { return }
        do throws(BackgroundJobs.Refusal) {
            try self.jobs.submit { await self.writeRegistrations() }
        } catch {
            let dropped = self.registry.plugins.abandonRegistrationSaves()
            self.logger.error(
                "plugin registrations not saved: \(error)", metadata: ["plugin": "\(name)", "writes": "\(dropped)"])
        }
    }

    /// Writes the queued registrations in turn, off the engine's executor; the one job that does so.
    @concurrent
    private nonisolated func writeRegistrations() async {
        while let save = await self.nextRegistrationSave() {
            save()
        }
    }

    private func nextRegistrationSave() -> (@Sendable () -> Void)? {
        self.registry.plugins.nextRegistrationSave()
    }

    /// Checks what a registration declares against this daemon: its plugin protocol version, its
    /// schema, and that no other namespace publishes its topics. Returns the schema and the
    /// descriptors' files, base64-encoded.
    private func checkRegistration(
        _ request: Mentory_V1_PluginRegisterRequest
    ) throws(MentoryError) -> (NamespaceInfo, [String]) {
        guard request.pluginProtocolVersion == WireProtocol.pluginProtocolVersion else {
            throw .invalidArgument(
                "plugin protocol version \(request.pluginProtocolVersion) is not supported;"
                    + " this daemon speaks version \(WireProtocol.pluginProtocolVersion)")
        }
        let info = try Self.validate(request, known: self.inProcessDescriptors)
        for topic in info.topics {
            if let owner = self.hub.owner(of: topic.name), owner != request.namespace {
                throw .invalidArgument("topic '\(topic.name)' is already published by '\(owner)'")
            }
        }
        do {
            return (info, try request.descriptors.file.map { try $0.serializedData().base64EncodedString() })
        } catch {
            throw .invalidArgument("the descriptors cannot be encoded: \(error)")
        }
    }

    /// Records that a registration for `plugin`'s namespace, from a caller allowed to register, was
    /// refused for a fault of the plugin's own: it is failed until it registers or its connection closes.
    ///
    /// A plugin connected on another connection keeps serving; a refused re-registration on its own
    /// connection leaves its earlier registration in force.
    private func registrationRefused(
        _ plugin: HostedPlugin,
        error: MentoryError,
        connection: ConnectionContext
    ) {
        self.logger.warning(
            "plugin registration refused: '\(plugin.declaration.name)' (namespace \(plugin.namespace)): \(error.message)",
            metadata: [
                "plugin": "\(plugin.declaration.name)", "namespace": "\(plugin.namespace)",
                "connection": "\(connection.id)", "reason": "\(error.message)",
            ])
        guard !plugin.isConnected else { return }
        plugin.state = .failed(
            reason: Self.bounded(error.message, bytes: WireProtocol.maxPluginFailureReasonBytes),
            since: self.clock.now(), connection: connection.id)
    }

    /// `text`, cut at a character boundary to at most `bytes` UTF-8 bytes, ending in "…" when cut.
    package static func bounded(_ text: String, bytes: Int) -> String {
        guard text.utf8.count > bytes else { return text }
        var cut = Substring(text)
        while cut.utf8.count > bytes - "…".utf8.count, !cut.isEmpty { cut.removeLast() }
        return cut + "…"
    }

    /// The descriptors of mentory.proto and of every namespace served in this process (the built-in
    /// domain's mentory_domain.proto among them), whose messages a plugin may name without sending them.
    /// Other plugins' are not among them: a plugin's schema must not depend on another plugin staying.
    var inProcessDescriptors: [SchemaDescriptors] {
        [MentorySchema.fileDescriptors]
            + self.registry.registrationOrder.compactMap { self.registry.handlers[$0]?.descriptors }
    }

    /// Checks a registration's declaration: names present and unique, within bounds, every message in the
    /// descriptors it sends or in `known` (mentory.proto's and the in-process namespaces').
    static func validate(
        _ request: Mentory_V1_PluginRegisterRequest,
        known: [SchemaDescriptors]
    ) throws(MentoryError) -> NamespaceInfo {
        guard !request.methods.isEmpty || !request.topics.isEmpty else {
            throw .invalidArgument("a plugin must register at least one method or topic")
        }
        guard request.methods.count <= WireProtocol.maxPluginMethods else {
            throw .invalidArgument(
                "\(request.methods.count) methods is more than the \(WireProtocol.maxPluginMethods)"
                    + " a plugin may register"
            )
        }
        guard request.topics.count <= WireProtocol.maxPluginTopics else {
            throw .invalidArgument(
                "\(request.topics.count) topics is more than the \(WireProtocol.maxPluginTopics) a plugin may register")
        }
        var messages: Set<String> = []
        func collect(_ message: Google_Protobuf_DescriptorProto, prefix: String) {
            let name = prefix + message.name
            messages.insert(name)
            for nested in message.nestedType { collect(nested, prefix: name + ".") }
        }
        for file in request.descriptors.file {
            let prefix = file.package.isEmpty ? "" : file.package + "."
            for message in file.messageType { collect(message, prefix: prefix) }
        }
        var seenFiles: Set<String> = []
        for file in known.flatMap(\.files) where seenFiles.insert(file.name).inserted {
            let prefix = file.package.isEmpty ? "" : file.package + "."
            for message in file.messageType { collect(message, prefix: prefix) }
        }
        func check(_ type: String, of what: String) throws(MentoryError) {
            guard messages.contains(type) else {
                throw .invalidArgument("\(what) names message '\(type)', which the registration's descriptors lack")
            }
        }
        var seen: Set<String> = []
        for method in request.methods {
            guard !method.name.isEmpty, seen.insert(method.name).inserted else {
                throw .invalidArgument("method names must be non-empty and unique; '\(method.name)' is not")
            }
            try check(method.request, of: "method '\(method.name)'")
            try check(method.reply, of: "method '\(method.name)'")
        }
        seen = []
        for topic in request.topics {
            guard !topic.name.isEmpty, seen.insert(topic.name).inserted else {
                throw .invalidArgument("topic names must be non-empty and unique; '\(topic.name)' is not")
            }
            try check(topic.change, of: "topic '\(topic.name)'")
            try check(topic.snapshot, of: "topic '\(topic.name)'")
        }
        let declared = Self.declaredPrivileges(of: request.namespace, in: request.descriptors)
        let declaredReads = Self.declaredTopicReads(of: request.namespace, in: request.descriptors)
        return NamespaceInfo(
            name: request.namespace,
            version: request.version,
            methods: request.methods.map { method in
                MethodInfo(
                    name: method.name, request: method.request, reply: method.reply,
                    privilege: Self.stricter(method.privilege, declared[method.name] ?? .unspecified))
            },
            topics: request.topics.map { topic in
                // What the topic reads, as the registration says and as its schema declares: the union, so that
                // a registration cannot drop a read its schema declares.
                var reads = topic.reads
                for read in declaredReads[topic.name] ?? [] where !reads.contains(read) { reads.append(read) }
                return TopicInfo(name: topic.name, change: topic.change, snapshot: topic.snapshot, reads: reads)
            }
        )
    }

    /// The `reads` of the topics that the service declaring `(mentory.v1.namespace) = namespace` in
    /// `descriptors` declares, by topic name.
    static func declaredTopicReads(
        of namespace: String, in descriptors: Google_Protobuf_FileDescriptorSet
    ) -> [String: [String]] {
        var reads: [String: [String]] = [:]
        for (_, options) in Self.declaredServices(of: namespace, in: descriptors) {
            for topic in options.Mentory_V1_topic {
                reads[topic.name, default: []].append(contentsOf: topic.reads)
            }
        }
        return reads
    }

    /// The `(mentory.v1.privilege)` options of the methods of the service that `descriptors` declare
    /// with `(mentory.v1.namespace) = namespace`, by method name: a plugin's methods are privileged as
    /// its schema declares them, whether or not its `MethodDescription`s say so too.
    static func declaredPrivileges(
        of namespace: String, in descriptors: Google_Protobuf_FileDescriptorSet
    ) -> [String: Mentory_V1_Privilege] {
        var privileges: [String: Mentory_V1_Privilege] = [:]
        for (service, _) in Self.declaredServices(of: namespace, in: descriptors) {
            for method in service.method where method.hasOptions {
                guard
                    let options = try? Google_Protobuf_MethodOptions(
                        serializedBytes: method.options.serializedData(),
                        extensions: Mentory_V1_Mentory_Extensions)
                else { continue }
                privileges[method.name] = Self.stricter(
                    privileges[method.name] ?? .unspecified, options.Mentory_V1_privilege)
            }
        }
        return privileges
    }

    /// The services `descriptors` declare with `(mentory.v1.namespace) = namespace`, each with its options decoded
    /// with the schema's extensions (decoded without them, the options are unknown fields).
    private static func declaredServices(
        of namespace: String, in descriptors: Google_Protobuf_FileDescriptorSet
    ) -> [(Google_Protobuf_ServiceDescriptorProto, Google_Protobuf_ServiceOptions)] {
        var services: [(Google_Protobuf_ServiceDescriptorProto, Google_Protobuf_ServiceOptions)] = []
        for file in descriptors.file {
            for service in file.service where service.hasOptions {
                guard
                    let options = try? Google_Protobuf_ServiceOptions(
                        serializedBytes: service.options.serializedData(), extensions: Mentory_V1_Mentory_Extensions),
                    options.Mentory_V1_namespace == namespace
                else { continue }
                services.append((service, options))
            }
        }
        return services
    }

    /// The stricter of two privileges: a declared one over none, else the higher (root over owner).
    static func stricter(_ first: Mentory_V1_Privilege, _ second: Mentory_V1_Privilege) -> Mentory_V1_Privilege {
        if first == .unspecified { return second }
        if second == .unspecified { return first }
        return first.rawValue >= second.rawValue ? first : second
    }

    /// Publishes a change from the calling plugin on one of its topics.
    func publishFromPlugin(_ request: Mentory_V1_PluginPublishRequest, call: RequestContext) throws(MentoryError) {
        guard let plugin = self.registry.plugins.plugin(on: call.connection.id) else {
            throw .invalidArgument("register with plugin.register before publishing")
        }
        guard plugin.info.topics.contains(where: { $0.name == request.topic }) else {
            throw .invalidArgument(
                "plugin '\(plugin.declaration.name)' registered no topic '\(request.topic)'; its topics are: "
                    + plugin.info.topics.map(\.name).joined(separator: ", "))
        }
        // Copied once, into a buffer the event is then framed in.
        var body = ProtobufBuffer(request.body)
        self.publish(&body, on: request.topic)
    }

    /// Sends a reset to every subscriber of `topics`, e.g. after their plugin registered again.
    func resetSubscribers(of topics: [String]) async {
        for topic in topics {
            for id in self.hub.subscribers(of: topic).sorted(by: { $0.rawValue < $1.rawValue }) {
                guard let generation = self.hub.beginForcedReset(id, topic) else { continue }
                do throws(MentoryError) {
                    try await self.sendState(of: topic, to: id, kind: .reset, generation: generation)
                } catch {
                    // Logged by sendState. Held again if the plugin went away meanwhile; otherwise
                    // the subscriber's next drain tries again.
                    if self.hub.entry(id, topic)?.generation == generation {
                        let absent = self.absentPlugin(publishing: topic) != nil
                        self.hub.setDelivery(absent ? .held : .overflowed, id, topic)
                    }
                }
            }
        }
    }

    // MARK: Forwarding

    /// Forwards a call (or, with `snapshotTopic`, a snapshot) to the plugin serving `namespace` and
    /// awaits its answer until the deadline: the call's own (or, for a snapshot, `deadline`), at most
    /// `limits.pluginCallTimeoutMilliseconds`.
    ///
    /// Never waits synchronously: the engine serves other requests meanwhile. Fails at once with
    /// UNAVAILABLE when the plugin is not connected or its queue is full, with DEADLINE_EXCEEDED at
    /// the deadline (a task scheduled on the event loop, or a timer of ``jobs``), and with UNAVAILABLE as
    /// soon as the plugin disconnects. A call
    /// whose deadline no timer can keep is not sent: SHUTTING_DOWN once the jobs stopped, INTERNAL
    /// when nothing runs them (never in the daemon, which runs them before it serves).
    func forwardToPlugin(
        _ namespace: String,
        method: String,
        snapshotTopic: String,
        body: Data,
        call: RequestContext?,
        deadline callersDeadline: ContinuousClock.Instant? = nil
    ) async throws -> Data {
        guard let plugin = self.registry.plugins[namespace] else {
            throw MentoryError.unknownNamespace(namespace)
        }
        if let unavailable = self.registry.plugins.unavailability(of: plugin) { throw unavailable }
        guard case .connected(let pluginConnection, _) = plugin.state,
            let connection = self.connections[pluginConnection]
        else {
            throw MentoryError.unavailable("namespace '\(namespace)' is unavailable: its plugin is disconnecting")
        }
        if snapshotTopic.isEmpty, plugin.info.method(named: method) == nil {
            throw MentoryError.unknownMethod(namespace: namespace, method: method)
        }
        let label = snapshotTopic.isEmpty ? method : "snapshot(\(snapshotTopic))"
        let now = ContinuousClock.now
        let deadline = min(
            call?.deadline ?? callersDeadline ?? now + self.configuration.pluginCallTimeout,
            now + self.configuration.pluginCallTimeout)
        let timeout = Self.milliseconds(deadline - now)
        guard timeout > 0 else {
            throw MentoryError.deadlineExceeded(namespace: namespace, method: label, milliseconds: 0)
        }
        plugin.nextCallID += 1
        let callID = plugin.nextCallID
        var message = Mentory_V1_PluginCall()
        message.callID = callID
        message.namespace = namespace
        message.method = method
        message.body = body
        message.timeoutMs = timeout
        message.snapshotTopic = snapshotTopic
        if let caller = call?.connection {
            message.caller.clientName = caller.clientName
            message.caller.connection = caller.id.rawValue
            if let credentials = caller.credentials {
                message.caller.known = true
                message.caller.pid = credentials.pid
                message.caller.uid = credentials.uid
                message.caller.gid = credentials.gid
            }
        }
        // The deadline's timer, taken before the call goes out, so that no call is sent that nothing
        // would fail at its deadline.
        let timer = try self.deadlineTimer(at: deadline, plugin: plugin, label: label) {
            engine in engine.expirePluginCall(namespace, callID: callID, milliseconds: Int(timeout))
        }
        guard connection.sink.deliver(pluginCall: message) else {
            timer.cancel()
            self.logger.warning(
                "plugin queue full; call refused: '\(plugin.declaration.name)' is not taking \(label) (it may be hung)",
                metadata: ["plugin": "\(plugin.declaration.name)", "method": "\(label)"])
            throw MentoryError.unavailable(
                "namespace '\(namespace)' is unavailable: its plugin '\(plugin.declaration.name)' is not taking calls"
                    + " (its queue is full at limits.maxOutboundBytes); it may be hung")
        }
        return try await withCheckedThrowingContinuation { continuation in
            plugin.pending[callID] = HostedPlugin.PendingCall(
                continuation: continuation, timer: timer, label: label, caller: call)
        }
    }

    /// A timer that runs `expire` on this engine at `deadline`: a task scheduled on the engine's event loop
    /// when the engine runs on one (the daemon's: no task of its own, and cheap), else a timer of ``jobs``.
    ///
    /// Throws, and nothing is scheduled, when the jobs refuse the timer: SHUTTING_DOWN once they stopped,
    /// INTERNAL when nothing runs them.
    private func deadlineTimer(
        at deadline: ContinuousClock.Instant,
        plugin: HostedPlugin,
        label: String,
        _ expire: @escaping @Sendable (isolated MentoryEngine) -> Void
    ) throws -> HostedPlugin.DeadlineTimer {
        if let loop = self.eventLoop, loop.inEventLoop {
            // Run on the loop, which is this engine's executor: isolated to it already.
            let scheduled = loop.scheduleTask(in: .nanoseconds(max(0, (deadline - .now).nanoseconds))) {
                self.assumeIsolated { expire($0) }
            }
            return .scheduled(scheduled)
        }
        do throws(BackgroundJobs.Refusal) {
            return .job(try self.jobs.schedule(at: deadline) { await expire(self) })
        } catch {
            self.logger.error(
                "a plugin call was not sent: its deadline cannot be kept: \(error)",
                metadata: ["plugin": "\(plugin.declaration.name)", "method": "\(label)"])
            throw error.reason == .stopped ? MentoryError.shuttingDown : MentoryError.internal("\(error)")
        }
    }

    /// Fails a forwarded call whose deadline passed; its answer, should it come, is dropped.
    func expirePluginCall(_ namespace: String, callID: UInt64, milliseconds: Int) {
        guard let plugin = self.registry.plugins[namespace],
            let pending = plugin.pending.removeValue(forKey: callID)
        else { return }
        self.logger.warning(
            """
            plugin did not answer within the deadline: '\(plugin.declaration.name)', \(pending.label), \
            \(milliseconds) ms
            """,
            metadata: [
                "plugin": "\(plugin.declaration.name)", "method": "\(pending.label)",
                "milliseconds": "\(milliseconds)",
            ])
        pending.continuation.resume(
            throwing: MentoryError.deadlineExceeded(
                namespace: namespace, method: pending.label, milliseconds: milliseconds))
    }

    /// Completes the forwarded call a plugin answered; a late or unknown answer is dropped.
    package func pluginReply(_ reply: Mentory_V1_PluginReply, from id: ConnectionID) {
        guard let plugin = self.registry.plugins.plugin(on: id) else {
            self.logger.debug(
                "a PluginReply from a connection that serves no plugin", metadata: ["connection": "\(id)"])
            return
        }
        guard let pending = plugin.pending.removeValue(forKey: reply.callID) else {
            self.logger.debug(
                "a late or unknown PluginReply dropped",
                metadata: ["plugin": "\(plugin.declaration.name)", "call": "\(reply.callID)"])
            return
        }
        pending.timer.cancel()
        switch reply.result {
        case .body(let body):
            pending.continuation.resume(returning: body)
        case .error(var error):
            if Mentory_V1_ErrorCode(rawValue: Int(error.code)) == nil || error.code == 0 {
                error.code = UInt32(Mentory_V1_ErrorCode.internal.rawValue)
            }
            pending.continuation.resume(throwing: PluginCallError(wire: error))
        case nil:
            pending.continuation.resume(
                throwing: MentoryError.internal(
                    "plugin '\(plugin.declaration.name)' answered \(plugin.namespace).\(pending.label)"
                        + " with neither body nor error"
                ))
        }
    }

    /// A plugin's connection went away: it waits again, and every call in flight to it fails at once.
    func pluginDisconnected(_ id: ConnectionID) {
        // A failed plugin stays failed (with its reason) after the refused connection closes: a plugin
        // that exits when refused, as mentory-advisor does under systemd, still shows why in status
        // until a registration succeeds.
        guard let plugin = self.registry.plugins.disconnect(id, since: self.clock.now()) else { return }
        let namespace = plugin.namespace
        // Its subscribers stay subscribed, held until it registers again (and resets them).
        for topic in plugin.info.topics {
            self.hub.holdSubscribers(of: topic.name)
        }
        let inFlight = plugin.pending.count
        plugin.failPending(
            .unavailable(
                "namespace '\(namespace)' is unavailable: its plugin '\(plugin.declaration.name)' disconnected"
                    + " while the call was in flight"))
        self.logger.warning(
            """
            plugin disconnected: '\(plugin.declaration.name)' (namespace \(namespace)); \(inFlight) calls in \
            flight failed UNAVAILABLE
            """,
            metadata: [
                "plugin": "\(plugin.declaration.name)", "namespace": "\(namespace)", "callsFailed": "\(inFlight)",
            ])
    }

    static func milliseconds(_ duration: Duration) -> UInt32 {
        let (seconds, attoseconds) = duration.components
        return UInt32(clamping: max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }
}
