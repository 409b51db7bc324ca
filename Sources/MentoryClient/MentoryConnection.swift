/// A connection to mentoryd that reconnects by itself.
///
/// Each call uses the current connection, opening a new one (with back-off) when there is none
/// or it was lost, so a client outlives daemon restarts. A call in flight when the connection
/// drops fails with ``MentoryClientError/connectionClosed(reason:)`` and is not retried, because
/// the daemon may or may not have carried it out.
///
/// At most one connection is open at a time: concurrent callers of ``client()`` share one
/// connection attempt, a lost connection is closed before it is replaced, and ``close()`` also
/// abandons an attempt in progress (a connection it opens afterwards is closed at once).
/// A socket refused by ``SocketTrust`` is not retried.
public actor MentoryConnection {
    private let socketPath: String
    private let clientName: String
    private let policy: ReconnectPolicy
    private let connectAttempts: Int
    private let trust: SocketTrust
    private var current: MentoryClient?
    /// The attempt in progress, shared by every caller that finds no live connection.
    private var connecting: (generation: UInt64, task: Task<MentoryClient, any Error>)?
    /// Bumped by ``close()``, so an attempt that outlives it knows its connection is unwanted.
    private var generation: UInt64 = 0

    /// Creates a connection that tries up to `connectAttempts` times per call to (re)connect.
    public init(
        socketPath: String, clientName: String, reconnect: ReconnectPolicy = ReconnectPolicy(),
        connectAttempts: Int = 20, trust: SocketTrust = .standard()
    ) {
        self.socketPath = socketPath
        self.clientName = clientName
        self.policy = reconnect
        self.connectAttempts = max(1, connectAttempts)
        self.trust = trust
    }

    /// The live client, connecting first when needed.
    public func client() async throws(MentoryClientError) -> MentoryClient {
        if let current = self.current {
            if current.isConnected { return current }
            self.current = nil
            await current.close()
        }
        let task: Task<MentoryClient, any Error>
        let generation = self.generation
        if let connecting = self.connecting, connecting.generation == generation {
            task = connecting.task
        } else {
            let (socketPath, clientName, policy, attempts, trust) = (
                self.socketPath, self.clientName, self.policy, self.connectAttempts, self.trust
            )
            task = Task {
                try await Self.connect(
                    socketPath: socketPath, clientName: clientName, policy: policy, attempts: attempts, trust: trust)
            }
            self.connecting = (generation, task)
        }
        let result = await task.result
        if self.connecting?.generation == generation, self.connecting?.task == task {
            self.connecting = nil
        }
        switch result {
        case .success(let client):
            guard generation == self.generation else {
                // ``close()`` ran while this attempt was under way.
                await client.close()
                throw .connectionClosed(reason: "the connection was closed while it was being opened")
            }
            if let current = self.current, current !== client {
                // Only possible if a newer attempt won; keep one connection.
                await client.close()
                return current
            }
            self.current = client
            return client
        case .failure(let error):
            throw error as? MentoryClientError ?? .cancelled
        }
    }

    /// Closes the current connection, if any, and abandons an attempt in progress.
    public func close() async {
        self.generation &+= 1
        self.connecting?.task.cancel()
        self.connecting = nil
        let current = self.current
        self.current = nil
        await current?.close()
    }

    private static func connect(
        socketPath: String, clientName: String, policy: ReconnectPolicy, attempts: Int, trust: SocketTrust
    ) async throws(MentoryClientError) -> MentoryClient {
        var lastError = MentoryClientError.cannotConnect(path: socketPath, reason: "not tried")
        for attempt in 0..<attempts {
            if Task.isCancelled { throw .cancelled }
            do {
                return try await MentoryClient.connect(socketPath: socketPath, clientName: clientName, trust: trust)
            } catch .untrustedSocket(let path, let reason) {
                throw .untrustedSocket(path: path, reason: reason)
            } catch {
                lastError = error
            }
            if attempt + 1 < attempts {
                do {
                    try await Task.sleep(for: policy.delay(forAttempt: attempt))
                } catch {
                    throw .cancelled
                }
            }
        }
        throw lastError
    }
}
