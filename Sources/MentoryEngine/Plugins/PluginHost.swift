#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryHandlerKit
import MentoryWire

/// The plugins the configuration declares: each one's hosted namespace (``HostedPlugin``), which
/// connection serves which, and the chain of writes of their registrations.
///
/// The engine holds one as a stored property and mutates it in place, on its own executor; it forwards
/// calls and publishes itself. Invariants:
/// - a namespace is declared once, and ``declared`` lists the plugins in declaration order;
/// - a connection serves at most one plugin, and a connection serving a plugin is the one that plugin's
///   state names as connected (``connect(_:on:since:)``, ``disconnect(_:since:)``);
/// - each registration write starts after the one before it has ended (``queueRegistrationSave(_:)``).
struct PluginHost {
    /// The declared plugins, by namespace.
    private var plugins: [String: HostedPlugin] = [:]
    /// Their namespaces, in declaration order.
    private var order: [String] = []
    /// The namespace each registered plugin's connection serves.
    private var servedBy: [ConnectionID: String] = [:]
    /// Writes of plugins' registrations asked for and not started yet, oldest first. One background job
    /// at a time writes them, in turn, so they land in order (``queueRegistrationSave(_:)``).
    private var unsavedRegistrations: [@Sendable () -> Void] = []
    /// Whether a background job is writing registrations now.
    private(set) var isSavingRegistrations = false
    /// Who waits for every write asked for to have ended (shut-down, ``waitForRegistrationSaves()``).
    private var registrationSaveWaiters: [CheckedContinuation<Void, Never>] = []
    /// Connections whose registration was refused because no plugin declared the namespace they asked for, with
    /// that namespace: each is closed once a reload declares it, so that its plugin registers again at once.
    private var awaitingDeclaration: [ConnectionID: String] = [:]
    /// How an operator reaches this instance's plugin units: `systemctl --user` under a user instance,
    /// `systemctl` for the system's; the hints of UNAVAILABLE errors name it.
    var systemctl = "systemctl"

    /// The plugin declared for `namespace`, if any.
    subscript(namespace: String) -> HostedPlugin? {
        self.plugins[namespace]
    }

    /// The declared plugins, in declaration order.
    var declared: [HostedPlugin] {
        self.order.map { self.plugins[$0]! }
    }

    /// The plugin that connection `id` registered as, if it did.
    func plugin(on id: ConnectionID) -> HostedPlugin? {
        self.servedBy[id].flatMap { self.plugins[$0] }
    }

    /// Hosts `plugin`, waiting until it registers. Its namespace must not be declared already.
    mutating func declare(_ plugin: HostedPlugin) {
        precondition(self.plugins[plugin.namespace] == nil, "plugin namespace '\(plugin.namespace)' declared twice")
        self.plugins[plugin.namespace] = plugin
        self.order.append(plugin.namespace)
    }

    /// Stops hosting the plugin declared for `namespace` and returns it, with the connection it was registered
    /// on (if any), which serves nothing from now on.
    mutating func undeclare(_ namespace: String) -> (plugin: HostedPlugin, connection: ConnectionID?)? {
        guard let plugin = self.plugins.removeValue(forKey: namespace) else { return nil }
        self.order.removeAll { $0 == namespace }
        let connection = self.servedBy.first { $0.value == namespace }?.key
        if let connection { self.servedBy[connection] = nil }
        return (plugin, connection)
    }

    /// Records that connection `id` asked to register `namespace`, which no plugin declares.
    mutating func awaitDeclaration(of namespace: String, on id: ConnectionID) {
        self.awaitingDeclaration[id] = namespace
    }

    /// The connections waiting for `namespace` to be declared, forgotten from now on.
    mutating func takeConnectionsAwaiting(_ namespace: String) -> [ConnectionID] {
        let waiting = self.awaitingDeclaration.filter { $0.value == namespace }.map(\.key)
        for id in waiting { self.awaitingDeclaration[id] = nil }
        return waiting
    }

    // MARK: Registration

    /// Throws unless connection `id` may register as `plugin`: it serves no other namespace already, and
    /// no other connection serves `plugin` now.
    func checkConnection(_ id: ConnectionID, mayRegisterAs plugin: HostedPlugin) throws(MentoryError) {
        if let served = self.servedBy[id], served != plugin.namespace {
            throw .invalidArgument("this connection already serves namespace '\(served)'; one namespace per connection")
        }
        if case .connected(let other, _) = plugin.state, other != id {
            throw .conflict(
                "plugin '\(plugin.declaration.name)' is already connected (connection \(other))"
                    + " and serves '\(plugin.namespace)';"
                    + " stop the other instance first")
        }
    }

    /// Records that connection `id` serves `plugin` from `since` on.
    mutating func connect(_ plugin: HostedPlugin, on id: ConnectionID, since: Date) {
        plugin.state = .connected(id, since: since)
        self.servedBy[id] = plugin.namespace
    }

    /// Records that connection `id` went away: the plugin it served, which it returns, waits again from
    /// `since` on. `nil` when it served none (a failed plugin stays failed, with its reason).
    mutating func disconnect(_ id: ConnectionID, since: Date) -> HostedPlugin? {
        self.awaitingDeclaration[id] = nil
        guard let namespace = self.servedBy.removeValue(forKey: id), let plugin = self.plugins[namespace] else {
            return nil
        }
        plugin.state = .waiting(since: since)
        return plugin
    }

    /// Queues `save`, a write of a registration, after those asked for before it. Returns true when no
    /// job writes registrations now: the caller then starts one, which takes the writes in turn with
    /// ``nextRegistrationSave()``.
    mutating func queueRegistrationSave(_ save: @escaping @Sendable () -> Void) -> Bool {
        self.unsavedRegistrations.append(save)
        guard !self.isSavingRegistrations else { return false }
        self.isSavingRegistrations = true
        return true
    }

    /// The next write for the writing job, oldest first; `nil` when there is none left, which ends the
    /// job's turn (the next queued write starts another) and wakes who waits for the writes.
    mutating func nextRegistrationSave() -> (@Sendable () -> Void)? {
        if !self.unsavedRegistrations.isEmpty {
            return self.unsavedRegistrations.removeFirst()
        }
        self.isSavingRegistrations = false
        let waiters = self.registrationSaveWaiters
        self.registrationSaveWaiters = []
        for waiter in waiters { waiter.resume() }
        return nil
    }

    /// Drops the writes not started: no job could be started to write them. Wakes who waits for them.
    mutating func abandonRegistrationSaves() -> Int {
        let dropped = self.unsavedRegistrations.count
        self.unsavedRegistrations = []
        _ = self.nextRegistrationSave()
        return dropped
    }

    /// Records a wait for every write asked for to end; resumed at once when none is under way.
    mutating func awaitRegistrationSaves(_ waiter: CheckedContinuation<Void, Never>) {
        if self.isSavingRegistrations {
            self.registrationSaveWaiters.append(waiter)
        } else {
            waiter.resume()
        }
    }

    // MARK: Availability

    /// Why a call to `plugin` cannot be forwarded now, if it cannot: it is not connected, or a namespace
    /// it requires is served by a plugin that is not.
    func unavailability(of plugin: HostedPlugin) -> MentoryError? {
        if let absence = Self.absence(of: plugin) {
            let name = plugin.declaration.name
            let remedy =
                if case .failed = plugin.state {
                    "fix it and restart it, e.g. \(self.systemctl) restart"
                } else {
                    "start it, e.g. \(self.systemctl) start"
                }
            return .unavailable(
                "namespace '\(plugin.namespace)' is unavailable: its plugin '\(name)' \(absence);"
                    + " \(remedy) mentoryd-plugin@\(name)")
        }
        for required in plugin.declaration.requires {
            guard let dependency = self.plugins[required],
                let absence = Self.absence(of: dependency)
            else { continue }
            return .unavailable(
                "namespace '\(plugin.namespace)' is unavailable: it requires '\(required)', whose plugin"
                    + " '\(dependency.declaration.name)' \(absence)")
        }
        return nil
    }

    /// Why `plugin` is not serving, and since when, as a phrase after its name; `nil` when it is connected.
    private static func absence(of plugin: HostedPlugin) -> String? {
        switch plugin.state {
        case .waiting(let since):
            "is not connected (waiting since \(since.formatted(.iso8601)))"
        case .failed(let reason, let since, _):
            "failed to register: \(reason) (failed since \(since.formatted(.iso8601)))"
        case .connected:
            nil
        }
    }

    /// Every declared plugin's state, in declaration order, as `session.status` reports it.
    var statuses: [Mentory_V1_PluginStatus] {
        self.declared.map { plugin in
            var status = Mentory_V1_PluginStatus()
            status.name = plugin.declaration.name
            status.namespace = plugin.namespace
            let since: Date
            switch plugin.state {
            case .waiting(let date):
                status.state = .waiting
                since = date
            case .connected(_, let date):
                status.state = .connected
                since = date
            case .failed(let reason, let date, _):
                status.state = .failed
                status.reason = reason
                since = date
            }
            status.sinceUnixMs = Int64((since.timeIntervalSince1970 * 1000).rounded())
            status.callsInFlight = UInt32(clamping: plugin.pending.count)
            return status
        }
    }
}
