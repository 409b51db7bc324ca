#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// A plugin the configuration declares (`plugins.<name>`): the namespace it may register and what
/// that namespace requires.
public struct PluginDeclaration: Sendable, Equatable {
    /// The plugin's name in the configuration, e.g. `advisor`.
    public var name: String
    /// The one namespace it may register.
    public var namespace: String
    /// Namespaces its calls need; while one of them is a plugin that is not connected, calls fail UNAVAILABLE.
    public var requires: [String]

    public init(name: String, namespace: String, requires: [String] = []) {
        self.name = name
        self.namespace = namespace
        self.requires = requires
    }
}

/// What a reload changed in the declared plugins (``MentoryEngine/declarePlugins(_:)``), by plugin name.
public struct PluginDeclarationChanges: Sendable {
    /// Plugins declared anew.
    public var added: [String] = []
    /// Plugins no longer declared.
    public var removed: [String] = []
    /// Plugins whose `requires` changed.
    public var changed: [String] = []
    /// Plugins that could not be declared, with the reason.
    public var refused: [(name: String, reason: String)] = []

    /// Whether nothing changed.
    public var isEmpty: Bool {
        self.added.isEmpty && self.removed.isEmpty && self.changed.isEmpty && self.refused.isEmpty
    }
}

/// A namespace served by a plugin process, as the engine hosts it; kept once, in the engine's ``PluginHost``.
///
/// It holds no domain state, only the plugin's connection state and the calls forwarded to it and
/// not answered yet; the engine's gate does the forwarding
/// (``MentoryEngine/forwardToPlugin(_:method:snapshotTopic:body:call:)``), for calls and snapshots alike.
/// It lives on the engine's executor.
final class HostedPlugin {
    enum State {
        /// Not connected since then (declared at start-up, or its connection closed).
        case waiting(since: Date)
        /// Registered on this connection since then.
        case connected(ConnectionID, since: Date)
        /// Its last registration, on `connection`, was refused then for a fault of its own (`reason`,
        /// at most `WireProtocol.maxPluginFailureReasonBytes`); calls fail at once.
        case failed(reason: String, since: Date, connection: ConnectionID)
    }

    /// What fails a forwarded call at its deadline.
    enum DeadlineTimer {
        /// A task scheduled on the engine's event loop (the daemon's engine): no task of its own.
        case scheduled(Scheduled<Void>)
        /// A timer of the engine's background jobs (an engine on another executor).
        case job(BackgroundJobs.Timer)

        /// Cancels the timer: the call is not failed at its deadline. Idempotent.
        func cancel() {
            switch self {
            case .scheduled(let scheduled): scheduled.cancel()
            case .job(let timer): timer.cancel()
            }
        }
    }

    /// A call forwarded to the plugin and not answered yet.
    struct PendingCall {
        var continuation: CheckedContinuation<Data, any Error>
        /// Fails the call at its deadline; cancelled when the answer comes first.
        var timer: DeadlineTimer
        /// `method`, or `snapshot(topic)`, for messages.
        var label: String
        /// The call it forwards, for the plugin's calls on that caller's behalf (`plugin.call`); `nil` for a snapshot.
        var caller: RequestContext?
    }

    /// What the configuration declares; a reload may change what it requires.
    var declaration: PluginDeclaration
    private(set) var info: NamespaceInfo
    private(set) var descriptors: SchemaDescriptors
    var state: State
    var pending: [UInt64: PendingCall] = [:]
    var nextCallID: UInt64 = 0

    init(_ declaration: PluginDeclaration, since: Date) {
        self.declaration = declaration
        self.info = NamespaceInfo(name: declaration.namespace, version: 0, methods: [], topics: [])
        self.descriptors = SchemaDescriptors(base64Files: [])
        self.state = .waiting(since: since)
    }

    var namespace: String { self.declaration.namespace }

    /// Whether the plugin is registered now.
    var isConnected: Bool {
        if case .connected = self.state { return true }
        return false
    }

    /// What the plugin registered; replaces what an earlier registration said.
    func update(info: NamespaceInfo, descriptors: SchemaDescriptors) {
        self.info = info
        self.descriptors = descriptors
    }

    /// Fails every call in flight with `error`, at once.
    func failPending(_ error: MentoryError) {
        let calls = self.pending
        self.pending.removeAll()
        for (_, call) in calls.sorted(by: { $0.key < $1.key }) {
            call.timer.cancel()
            call.continuation.resume(throwing: error)
        }
    }

    /// Fails every call in flight: the daemon is shutting down.
    func close() {
        self.failPending(.shuttingDown)
    }
}

/// An error a plugin answered a call with, or a handler's error from a call made on a caller's
/// behalf (``MentoryEngine/call(_:_:body:for:from:)``); sent to the caller as it is written.
struct PluginCallError: Error {
    var wire: Mentory_V1_Error
}
